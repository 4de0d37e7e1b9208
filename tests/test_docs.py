"""The documentation site (tools/docs.sh): a page per notebook with its title and the sidebar, links
between pages that resolve, executed examples with their results, no error from execution, nothing
loaded from the network.

tools/test.sh builds the site once (`tools/docs.sh`, which executes every notebook) and points
PASSEPARTOUT_DOCS_SITE at it; run alone, this file builds it into a temporary directory (~1.5 min).
"""
import importlib.util, json, os, re, subprocess, sys, warnings
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
