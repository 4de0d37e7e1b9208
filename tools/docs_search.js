// Full-text search for the offline docs site (tools/docs.py copies this file to assets/search.js).
// The index, assets/search-index.js, lists every section of every page (page, heading, anchor, text);
// it is loaded by a <script> tag the first time someone types, so it works from file:// as well.
// Every word of the query must occur in a section (as a word prefix); headings weigh more than text.
'use strict';

function docsTerms(query) {
  // the words of a query, lower case, each at least one letter or digit
  return (query.toLowerCase().match(/[\p{L}\p{N}_]+/gu) || []).filter((t, i, all) => all.indexOf(t) === i);
}

function docsCount(haystack, term) {
  // how often `term` starts a word in `haystack` (lower case), at most 10
  let n = 0, i = haystack.indexOf(term);
  while (i >= 0 && n < 10) {
    if (i === 0 || !/[\p{L}\p{N}_]/u.test(haystack[i - 1])) n++;
    i = haystack.indexOf(term, i + 1);
  }
  return n;
}

function docsSearch(entries, query, limit = 30) {
  // the sections that hold every word of `query`, best first: [{entry, score}]
  const terms = docsTerms(query);
  if (!terms.length) return [];
  const hits = [];
  entries.forEach((e, order) => {
    const head = (e.h + ' ' + e.t).toLowerCase(), text = e.x.toLowerCase();
    let score = 0;
    for (const t of terms) {
      const inHead = docsCount(head, t), inText = docsCount(text, t);
      if (!inHead && !inText) return;
      score += 10 * inHead + inText;
    }
    hits.push({entry: e, score: score, order: order});
  });
  hits.sort((a, b) => b.score - a.score || a.order - b.order);
  return hits.slice(0, limit);
}

function docsSnippet(text, query, width = 160) {
  // about `width` characters of `text` around the first word of `query` it holds
  const lower = text.toLowerCase();
  const found = docsTerms(query).map(t => lower.indexOf(t)).filter(i => i >= 0);
  const at = found.length ? Math.min(...found) : 0;
  let start = Math.max(0, at - width / 3);
  if (start > 0) start = Math.min(at, text.indexOf(' ', start) + 1 || at);  // from the start of a word
  return (start > 0 ? '… ' : '') + text.slice(start, start + width) + (start + width < text.length ? ' …' : '');
}

if (typeof module !== 'undefined') module.exports = {docsTerms, docsCount, docsSearch, docsSnippet};

if (typeof document !== 'undefined') document.addEventListener('DOMContentLoaded', () => {
  const root = document.body.dataset.docsRoot || '';
  const html = document.documentElement, menu = document.querySelector('.docs-menu-button');
  const form = document.querySelector('.docs-search'), input = document.querySelector('.docs-search-input');
  const list = document.querySelector('.docs-search-results'), status = document.querySelector('.docs-search-status');
  const nav = document.querySelector('.docs-sidebar');
  menu.addEventListener('click', () => {
    const open = html.classList.toggle('docs-menu-open');
    menu.setAttribute('aria-expanded', String(open));
    if (open) input.focus();
  });
  let pending = null;
  function loadIndex() {
    if (window.docsSearchIndex) return Promise.resolve(window.docsSearchIndex);
    if (!pending) pending = new Promise((resolve, reject) => {
      const s = document.createElement('script');
      s.src = root + 'assets/search-index.js';
      s.onload = () => resolve(window.docsSearchIndex);
      s.onerror = () => { pending = null; reject(new Error('the search index did not load')); };
      document.head.appendChild(s);
    });
    return pending;
  }
  function mark(el, text, query) {
    // `text` into `el`, the query's words highlighted (built as DOM nodes: nothing is parsed as HTML)
    const terms = docsTerms(query);
    const re = terms.length ? new RegExp('(' + terms.map(t => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')).join('|') + ')', 'giu') : null;
    (re ? text.split(re) : [text]).forEach((part, i) => {
      if (i % 2) { const m = document.createElement('mark'); m.textContent = part; el.appendChild(m); }
      else el.appendChild(document.createTextNode(part));
    });
  }
  function show(query) {
    list.textContent = '';
    if (!docsTerms(query).length) { list.hidden = status.hidden = true; nav.hidden = false; return; }
    loadIndex().then(index => {
      if (input.value !== query) return;  // typed on meanwhile
      const hits = docsSearch(index.entries, query);
      status.hidden = false;
      status.textContent = hits.length ? hits.length + (hits.length === 30 ? '+' : '') + ' sections' : 'Nothing found for “' + query + '”';
      for (const {entry} of hits) {
        const li = document.createElement('li'), a = document.createElement('a');
        a.href = root + entry.p + (entry.a ? '#' + entry.a : '');
        const title = document.createElement('span'), page = document.createElement('span'), text = document.createElement('span');
        title.className = 'docs-hit-title'; page.className = 'docs-hit-page'; text.className = 'docs-hit-text';
        mark(title, entry.h, query);
        page.textContent = entry.h === entry.t ? entry.p : entry.t;
        mark(text, docsSnippet(entry.x, query), query);
        a.append(title, page, text);
        a.addEventListener('click', () => { html.classList.remove('docs-menu-open'); menu.setAttribute('aria-expanded', 'false'); });
        li.appendChild(a);
        list.appendChild(li);
      }
      list.hidden = false; nav.hidden = true;
    }, err => { status.hidden = false; status.textContent = err.message; });
  }
  input.addEventListener('input', () => show(input.value));
  input.addEventListener('keydown', ev => {
    if (ev.key === 'Escape') { input.value = ''; show(''); }
  });
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const first = list.querySelector('a');
    if (first) first.click();
  });
  const q = new URLSearchParams(window.location.search).get('q');  // index.html?q=WORDS opens with a search
  if (q) { input.value = q; html.classList.add('docs-menu-open'); menu.setAttribute('aria-expanded', 'true'); show(q); }
});
