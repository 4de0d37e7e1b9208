"""The documentation site (tools/docs.sh): a page per notebook with its title and the sidebar, links
between pages that resolve, executed examples with their results, no error from execution, nothing
loaded from the network; a search index covering every page, a search that finds known terms (under
node, and in a real page in headless chromium when they are installed), a Menu button on a phone.

tools/test.sh builds the site once (`tools/docs.sh`, which executes every notebook) and points
PASSEPARTOUT_DOCS_SITE at it; run alone, this file builds it into a temporary directory (~1.5 min).
"""
import importlib.util, json, os, re, shutil, subprocess, sys, warnings
from pathlib import Path
from urllib.parse import unquote, urlsplit
import pytest

ROOT = Path(__file__).resolve().parents[1]
bs4 = pytest.importorskip('bs4')  # comes with nbconvert (the `dev` extra)


def _docs_module():
    spec = importlib.util.spec_from_file_location('docs_builder', ROOT / 'tools' / 'docs.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


docs = _docs_module()
PAGES = docs.pages()


@pytest.fixture(scope='module')
def site(tmp_path_factory):
    built = os.environ.get('PASSEPARTOUT_DOCS_SITE')
    if built: path = Path(built)
    else:
        path = tmp_path_factory.mktemp('site')
        subprocess.run([sys.executable, str(ROOT / 'tools' / 'docs.py'), str(path)], cwd=ROOT, check=False)
    assert (path / 'pages.json').exists(), f'no site built in {path} (tools/docs.sh failed before writing pages.json)'
    return path


@pytest.fixture(scope='module')
def soups(site):
    return {p['page']: bs4.BeautifulSoup((site / p['page']).read_text(encoding='utf-8'), 'html.parser')
            for p in PAGES if (site / p['page']).exists()}


def test_reading_order_and_page_names():
    "index first, then the numbered notebooks in order; page names are the ones nbdev-docs gives them."
    from nbdev.config import nbpath2html
    assert PAGES and PAGES[0]['source'] == 'index.md', PAGES[:1]
    numbered = [p['source'] for p in PAGES if '/' not in p['source']][1:]
    assert numbered == sorted(numbered) and all(re.match(r'\d', s) for s in numbered), numbered
    assert not [p for p in PAGES if Path(p['source']).name.startswith('_')]
    for p in PAGES: assert p['page'] == nbpath2html(p['source']).as_posix(), p
    assert len({p['page'] for p in PAGES}) == len(PAGES), 'two notebooks would get the same page'


def test_every_notebook_has_a_page(site):
    sources = sorted(p.relative_to(ROOT / 'nbs').as_posix() for p in (ROOT / 'nbs').rglob('*.md')
                     if not any(part.startswith(('_', '.')) for part in p.relative_to(ROOT / 'nbs').parts))
    assert sorted(p['source'] for p in PAGES) == sources
    missing = [p['page'] for p in PAGES if not (site / p['page']).exists()]
    missing += [p['page'] + '.md' for p in PAGES if not (site / (p['page'] + '.md')).exists()]  # the modules' `Docs:` links
    assert not missing, f'no page for: {missing}'
    recorded = [r['source'] for r in json.loads((site / 'pages.json').read_text())]
    assert recorded == [p['source'] for p in PAGES], 'pages.json does not list the notebooks in reading order'


def test_every_page_has_its_title_and_the_navigation(soups):
    order = [p['page'] for p in PAGES]
    for p in PAGES:
        soup = soups[p['page']]
        assert soup.title and soup.title.string.strip() == p['title'], (p['page'], soup.title)
        assert soup.select_one('h1.docs-h1').get_text(strip=True) == p['title'], p['page']
        up = '../' * p['page'].count('/')
        nav = [a['href'].removeprefix(up) for a in soup.select('nav.docs-sidebar a')]
        assert nav == order, f"{p['page']}: sidebar does not list every page in reading order"
        titles = [a.get_text(strip=True) for a in soup.select('nav.docs-sidebar a')]
        assert titles == [q['title'] for q in PAGES], p['page']
        current = soup.select('nav.docs-sidebar li.docs-current a')
        assert len(current) == 1 and current[0]['href'].removeprefix(up) == p['page'], p['page']


def _symbol_link(el):
    "nbdev links every backticked exported name to its page; names without a show_doc have no anchor there (nor on Quarto's site)."
    children = [c for c in el.children if str(c).strip()]
    return len(children) == 1 and getattr(children[0], 'name', None) == 'code'


def test_relative_links_resolve(site, soups):
    broken, missing_anchor, anchors = [], [], {}
    for page, soup in soups.items():
        for tag, attr in (('a', 'href'), ('link', 'href'), ('img', 'src'), ('script', 'src')):
            for el in soup.find_all(tag):
                url = el.get(attr)
                if not url: continue
                parts = urlsplit(url)
                if parts.scheme or parts.netloc: continue
                target = ((site / page).parent / unquote(parts.path)).resolve() if parts.path else (site / page).resolve()
                if not target.is_file(): broken.append(f'{page}: {url}')
                elif parts.fragment and target.suffix == '.html' and not _symbol_link(el):
                    ids = anchors.setdefault(target, set(re.findall(r'\bid="([^"]+)"', target.read_text(encoding='utf-8'))))
                    if unquote(parts.fragment) not in ids: missing_anchor.append(f'{page}: {url}')
    assert not broken, f'{len(broken)} broken links, e.g. {broken[:10]}'
    assert not missing_anchor, f'{len(missing_anchor)} links to a missing anchor, e.g. {missing_anchor[:10]}'


def test_no_page_shows_an_error(site, soups):
    records = json.loads((site / 'pages.json').read_text())
    failed = {r['page']: r['errors'] for r in records if r['errors']}
    assert not failed, f'notebooks failed while the docs were built: {failed}'
    for page, soup in soups.items():
        assert not soup.select('.docs-error'), f'{page} shows an error output'
        outputs = ' '.join(o.get_text() for o in soup.select('.jp-OutputArea-output'))
        assert 'Traceback (most recent call last)' not in outputs, f'{page} shows a traceback'


def test_every_cell_runs_in_nbdev_docs_show_doc_shell(site):
    "nbdev-docs re-runs, in a shell of its own, only the cells with an import, an export or a show_doc: one that fails there stops it."
    records = json.loads((site / 'pages.json').read_text())
    unchecked = [r['source'] for r in records if 'show_doc_failures' not in r and not r['errors']]
    assert not unchecked, f'pages.json does not record show_doc_failures for {unchecked} (a site built by an older tools/docs.py?)'
    failing = {r['source']: r['show_doc_failures'] for r in records
               if r.get('show_doc_failures') and r['source'] not in docs.KNOWN_SHOW_DOC_FAILURES}
    assert not failing, f'cells that stop nbdev-docs (move their imports into the import cell): {failing}'
    stale = [r['source'] for r in records if r['source'] in docs.KNOWN_SHOW_DOC_FAILURES and r.get('show_doc_failures') == []]
    if stale: warnings.warn(f'remove {stale} from KNOWN_SHOW_DOC_FAILURES in tools/docs.py: no cell fails there any more')


@pytest.mark.filterwarnings('ignore:Found cells containing imports')
def test_the_builder_catches_a_cell_that_fails_in_the_show_doc_shell():
    "The check above can fail: an import mixed with code that needs an earlier example is reported, an import-only cell is not."
    from fastcore.nbio import dict2nb, mk_cell
    cells = [mk_cell('#| default_exp scratch'), mk_cell('#| export\ndef double(x): return 2 * x'), mk_cell('n = 21'),
             mk_cell('import math\nhalf = double(n) / 4'), mk_cell('import math'), mk_cell('double(n)')]
    nb = dict2nb({'cells': cells, 'metadata': {}, 'nbformat': 4, 'nbformat_minor': 5})
    failures = []
    docs._DocsFilter(failures)(nb)
    assert len(failures) == 1, failures
    assert "('import math') mixes imports with code" in failures[0] and "NameError: name 'n' is not defined" in failures[0], failures


def test_pages_show_executed_results_and_highlighted_code(soups):
    "The examples' displayed results are the evidence: most pages must show some."
    def examples_with_results(soup):
        return [c for c in soup.select('.jp-CodeCell') if c.select('.jp-InputArea') and c.select('.jp-OutputArea-output')]
    with_results = [page for page, soup in soups.items() if examples_with_results(soup)]
    assert len(with_results) >= (len(soups) - 1) * 0.6, f'only {len(with_results)} of {len(soups)} pages show results'
    highlighted = [page for page, soup in soups.items() if soup.select('.jp-InputArea .highlight span.kn, .jp-InputArea .highlight span.k')]
    assert len(highlighted) >= len(with_results), 'code cells are not highlighted'


def test_pages_need_no_network(soups):
    for page, soup in soups.items():
        remote = [el.get('src') or el.get('href') for el in soup.find_all(['script', 'link', 'img'])
                  if re.match(r'^(https?:)?//', el.get('src') or el.get('href') or '')]
        assert not remote, f'{page} loads {remote}'


# ---- search and the phone layout ----

def _search_index(site):
    text = (site / 'assets' / 'search-index.js').read_text(encoding='utf-8')
    prefix = 'window.docsSearchIndex = '
    assert text.startswith(prefix) and text.rstrip().endswith(';'), text[:80]
    return json.loads(text.strip()[len(prefix):-1])


def test_the_search_index_covers_every_page_and_its_anchors_resolve(site):
    index = _search_index(site)
    assert index['pages'] == [p['page'] for p in PAGES]
    by_page = {}
    for e in index['entries']: by_page.setdefault(e['p'], []).append(e)
    assert sorted(by_page) == sorted(p['page'] for p in PAGES), 'pages without a section in the index'
    titles = {p['page']: p['title'] for p in PAGES}
    for page, entries in by_page.items():
        assert all(e['t'] == titles[page] for e in entries), page
        ids = set(re.findall(r'\bid="([^"]+)"', (site / page).read_text(encoding='utf-8')))
        missing = [e['a'] for e in entries if e['a'] and e['a'] not in ids]
        assert not missing, f'{page}: index anchors with no element: {missing[:5]}'
    words = sum(len(e['x'].split()) for e in index['entries'])
    assert words > 20000, f'the index holds only {words} words: is the page text in it?'


node = shutil.which('node')


def _node_search(site_or_index, query):
    "Run assets/search.js's docsSearch under node on the site's index, or on a list of entries."
    script = 'const s = require(process.argv[1]); let entries;'
    if isinstance(site_or_index, Path):
        script += "global.window = {}; require(process.argv[2]); entries = window.docsSearchIndex.entries;"
        args = [str(site_or_index / 'assets' / 'search.js'), str(site_or_index / 'assets' / 'search-index.js')]
    else:
        script += 'entries = JSON.parse(process.argv[2]);'
        args = [str(ROOT / 'tools' / 'docs_search.js'), json.dumps(site_or_index)]
    script += 'console.log(JSON.stringify(s.docsSearch(entries, process.argv[3]).map(h => h.entry.p + "#" + h.entry.a)))'
    run = subprocess.run([node, '-e', script, *args, query], capture_output=True, text=True, check=True)
    return json.loads(run.stdout)


@pytest.mark.skipif(not node, reason='node is not installed')
def test_the_search_ranks_headings_first_and_needs_every_word():
    entries = [dict(p='a.html', t='A', h='Intro', a='intro', x='the vault keeps secrets; tokens expire'),
               dict(p='b.html', t='B', h='The vault', a='the-vault', x='a vault of secrets'),
               dict(p='c.html', t='C', h='Other', a='other', x='unvaulted things; secret tokens')]
    assert _node_search(entries, 'vault') == ['b.html#the-vault', 'a.html#intro']   # heading first; no match inside a word
    assert _node_search(entries, 'VAULT token') == ['a.html#intro']                 # every word, any case, as a prefix
    assert _node_search(entries, 'nothing-like-it') == [] and _node_search(entries, '  ') == []


@pytest.mark.skipif(not node, reason='node is not installed')
def test_the_search_finds_known_terms_on_the_built_site(site):
    assert _node_search(site, 'bubblewrap')[0].startswith('sandbox.html#')
    hits = _node_search(site, 'canonical digest')
    assert any(h.startswith('signals.html#') for h in hits[:5]), hits


chromium = shutil.which('chromium') or shutil.which('chromium-browser')


# A page that measures another one in a phone-sized frame: served beside the site (not written into it).
PHONE_PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="f" src="PAGE" style="width:390px;height:844px;border:0"></iframe>
<pre id="out"></pre>
<script>
const f = document.getElementById('f');
f.onload = () => setTimeout(() => {
  const d = f.contentDocument, shown = el => getComputedStyle(el).display !== 'none';
  const side = d.querySelector('.docs-side'), button = d.querySelector('.docs-menu-button');
  const before = {side: shown(side), button: shown(button), mainTop: Math.round(d.querySelector('.docs-main').getBoundingClientRect().top)};
  button.click();
  const after = {side: shown(side), expanded: button.getAttribute('aria-expanded'), focused: d.activeElement === d.querySelector('.docs-search-input')};
  document.getElementById('out').textContent = JSON.stringify({before, after});
}, 200);
</script></body></html>"""


@pytest.fixture(scope='module')
def served(site):
    "The site on a loopback port (pages opened from file:// with a fragment render blank in headless chromium)."
    import functools, http.server, threading
    class Handler(http.server.SimpleHTTPRequestHandler):
        def do_GET(self):
            if not self.path.startswith('/__phone_probe/'): return super().do_GET()
            body = PHONE_PROBE.replace('PAGE', '/' + self.path.removeprefix('/__phone_probe/')).encode()
            self.send_response(200); self.send_header('Content-Type', 'text/html'); self.send_header('Content-Length', str(len(body)))
            self.end_headers(); self.wfile.write(body)
        def log_message(self, *a): pass
    handler = functools.partial(Handler, directory=str(site))
    server = http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f'http://127.0.0.1:{server.server_address[1]}/'
    server.shutdown()


def _dom(url, size):
    run = subprocess.run([chromium, '--headless=new', '--no-sandbox', '--disable-gpu', f'--window-size={size}',
                          '--virtual-time-budget=5000', '--dump-dom', url], capture_output=True, text=True, timeout=120)
    return bs4.BeautifulSoup(run.stdout, 'html.parser')


@pytest.mark.skipif(not chromium, reason='chromium is not installed (apt-get install chromium)')
def test_the_search_box_lists_results_in_a_browser(served):
    "The real page in headless chromium: `?q=` fills the search box, the index loads, results link to sections."
    soup = _dom(served + 'errors.html?q=bubblewrap', '1280,900')
    links = [a['href'] for a in soup.select('.docs-search-results a')]
    assert links and links[0].startswith('sandbox.html#'), links[:3]
    assert soup.select_one('nav.docs-sidebar').has_attr('hidden'), 'the contents should give way to the results'
    assert 'bubblewrap' in soup.select_one('.docs-search-results mark').get_text().lower()


@pytest.mark.skipif(not chromium, reason='chromium is not installed (apt-get install chromium)')
def test_on_a_phone_the_page_comes_first_and_the_menu_opens_the_sidebar(served):
    "In a 390px-wide frame: the sidebar is hidden, the Menu button shown, the page right under the top bar; a tap opens it."
    out = _dom(served + '__phone_probe/signals.html', '1280,900').select_one('#out').get_text()
    state = json.loads(out)
    assert state['before'] == dict(side=False, button=True, mainTop=state['before']['mainTop']), state
    assert state['before']['mainTop'] < 100, f"the page starts {state['before']['mainTop']}px down: is the sidebar above it?"
    assert state['after'] == dict(side=True, expanded='true', focused=True), state


def test_every_page_has_the_search_box_and_the_menu_button(soups):
    for page, soup in soups.items():
        assert soup.select_one('form.docs-search input[type=search]'), page
        button = soup.select_one('button.docs-menu-button')
        assert button and button['aria-controls'] == 'docs-side' and soup.select_one('#docs-side nav.docs-sidebar'), page


def test_on_a_phone_the_sidebar_folds_into_the_menu(site):
    "Under 800px (with JavaScript) the sidebar is hidden until the Menu button opens it; the button shows only there."
    css = (site / 'assets' / 'site.css').read_text()
    phone = css[css.index('@media (max-width: 800px)'):]
    assert re.search(r'\.docs-js \.docs-side \{ display: none; \}', phone)
    assert re.search(r'\.docs-js\.docs-menu-open \.docs-side \{ display: block;', phone)
    assert re.search(r'\.docs-js \.docs-menu-button \{ display: inline-block; \}', phone)
    assert re.search(r'^\.docs-menu-button \{ display: none;', css, re.M)
