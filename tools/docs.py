"""Build the documentation site offline, without Quarto (called by tools/docs.sh).

Each notebook is executed once, in a fresh process, by the runner `nbdev-test` uses (execnb's
CaptureShell, same skip rules), then processed by nbdev's own docs processors (the ones
`nbdev-docs` runs before Quarto: frontmatter, hidden and exported cells, `show_doc` for every
exported name, links to symbols), then rendered to HTML with nbconvert's JupyterLab template plus
a sidebar.  Page names are nbdev's (`02_signals.ipynb` -> `signals.html`), so links work the same
here and on a site built by `nbdev-docs`.  Everything the pages need is in OUTDIR: no CDN.

Every page has a search box (tools/docs_search.js, plain JavaScript) over OUTDIR/assets/search-index.js,
an index of every section of every page written after the pages; on a narrow screen the sidebar folds
into a Menu button above the page.
Writes OUTDIR/pages.json: every page with its source, title and the errors met while building it.
Exit status 1 when any notebook raised while executing (the page still shows the error), or when a
cell fails in nbdev's show_doc shell, which stops `nbdev-docs` (`show_doc_failures`; see below).
"""
import argparse, html, json, os, re, shutil, sys, tempfile, time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing as mp
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NBS = ROOT / 'nbs'
SITE_URL = 'https://passepartout-agent.github.io/passepartout/'  # [project.urls] Documentation

# Notebooks (e.g. '32_approvals.md') whose cells still fail in nbdev-docs' show_doc shell: reported as
# warnings, not errors, until fixed. Keep it empty; an entry is temporary (the build says when it is stale).
KNOWN_SHOW_DOC_FAILURES = set()


def page_name(rel):
    "nbdev's page for a notebook path relative to nbs/: numeric prefix dropped, `.html` (see nbdev.config.nbpath2html)."
    rel = Path(rel)
    return rel.with_name(re.sub(r'^\d+[a-zA-Z0-9]*_', '', rel.name.lower())).with_suffix('.html').as_posix()


def heading(md_path):
    "The notebook's H1 title and its `>` one-line description, read from the Markdown source."
    title, description = md_path.stem, ''
    lines = md_path.read_text(encoding='utf-8').splitlines()
    for i, line in enumerate(lines):
        if line.startswith('# '):
            title = line[2:].strip()
            rest = [l for l in lines[i + 1:i + 4] if l.strip()]
            if rest and rest[0].startswith('> '): description = rest[0][2:].strip()
            break
    return title, description


def sources():
    "The notebooks in reading order: index, then NN_*.md, then sub-folders; names starting with `_` or `.` skipped."
    def keep(p): return not any(part.startswith(('_', '.')) for part in p.relative_to(NBS).parts)
    found = [p for p in NBS.rglob('*.md') if keep(p)]
    def order(p):
        rel = p.relative_to(NBS)
        return (len(rel.parts) > 1, rel.parts[:-1], p.name != 'index.md', p.name)
    return sorted(found, key=order)


def code_spans(text:str) -> str:
    "`text` as HTML: escaped, with its `code` spans set as <code>."
    return re.sub(r'`([^`]+)`', r'<code>\1</code>', html.escape(text, quote=False))


def pages():
    "Every page of the site: source notebook, page name, title and description, in reading order."
    out = []
    for md in sources():
        rel = md.relative_to(NBS)
        title, description = heading(md)
        out.append(dict(source=rel.as_posix(), page=page_name(rel), title=title, description=description))
    return out


# ---- one notebook: execute, process, render (runs in a fresh worker process) ----

TEMPLATE = r"""
{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
{%- block notebook_css -%}
<link rel="stylesheet" href="{{ resources.docs.root }}assets/notebook.css">
{%- endblock notebook_css -%}
{%- block extra_css -%}
<meta name="description" content="{{ resources.docs.description | e }}">
{%- endblock extra_css -%}
{%- block html_head_css -%}
<link rel="stylesheet" href="{{ resources.docs.root }}assets/site.css">
<script>document.documentElement.classList.add('docs-js')</script>
<script defer src="{{ resources.docs.root }}assets/search.js"></script>
{%- endblock html_head_css -%}
{%- block body_header -%}
<body class="jp-Notebook docs-page" data-jp-theme-light="true" data-jp-theme-name="JupyterLab Light" data-docs-root="{{ resources.docs.root }}">
<header class="docs-topbar"><button type="button" class="docs-menu-button" aria-controls="docs-side" aria-expanded="false">&#9776; Menu</button>
<a href="{{ resources.docs.root }}index.html">{{ resources.docs.site_title | e }}</a></header>
<div class="docs-layout">
<div class="docs-side" id="docs-side">
<form class="docs-search" role="search" action="{{ resources.docs.root }}index.html"><input type="search" name="q" class="docs-search-input" placeholder="Search the notebooks" aria-label="Search the notebooks" autocomplete="off">
<p class="docs-search-status" aria-live="polite" hidden></p>
<ol class="docs-search-results" hidden></ol></form>
<nav class="docs-sidebar" aria-label="Notebooks">
<ol>
{%- for p in resources.docs.nav %}
{%- if p.section %}<li class="docs-section">{{ p.section | e }}</li>{% endif %}
<li{% if p.page == resources.docs.page %} class="docs-current" aria-current="page"{% endif %}><a href="{{ resources.docs.root }}{{ p.page }}">{{ p.title | e }}</a></li>
{%- endfor %}
</ol>
</nav>
</div>
<main class="docs-main">
<header class="docs-title"><h1 class="docs-h1">{{ resources.docs.title | e }}</h1>
{%- if resources.docs.description %}<p class="docs-description">{{ resources.docs.description_html }}</p>{% endif %}
<p class="docs-source">Source: <code>nbs/{{ resources.docs.source | e }}</code></p></header>
{%- endblock body_header -%}
{%- block error -%}
<div class="docs-error">{{ super() }}</div>
{%- endblock error -%}
{% block body_footer %}
<footer class="docs-pager">
{%- if resources.docs.prev %}<a class="docs-prev" href="{{ resources.docs.root }}{{ resources.docs.prev.page }}">&larr; {{ resources.docs.prev.title | e }}</a>{% endif %}
{%- if resources.docs.next %}<a class="docs-next" href="{{ resources.docs.root }}{{ resources.docs.next.page }}">{{ resources.docs.next.title | e }} &rarr;</a>{% endif %}
</footer>
</main>
</div>
</body>
{% endblock body_footer %}
"""

_directive = re.compile(r'^\s*#\|\s*([\w-]+)\s*:\s*(.*?)\s*$')


def _quarto_directives(nb):
    "Apply the Quarto cell options nbdev leaves in the source (echo, include, output) and drop the `#|` lines."
    keep = []
    for cell in nb.cells:
        if cell.cell_type == 'raw': continue  # the frontmatter; shown by the template
        if cell.cell_type == 'code':
            lines, opts = cell.source.splitlines(), {}
            while lines and _directive.match(lines[0]):
                key, value = _directive.match(lines[0]).groups()
                opts[key] = value.strip('"\'').lower()
                lines.pop(0)
            cell.source = '\n'.join(lines)
            if opts.get('include') == 'false': continue
            tags = cell.metadata.setdefault('tags', [])
            if opts.get('echo') == 'false' or not cell.source.strip(): tags.append('docs-hide-input')
            if opts.get('output') == 'false': tags.append('docs-hide-output')
        keep.append(cell)
    nb.cells = keep


_CELL_KEYS = dict(code={'cell_type', 'id', 'metadata', 'source', 'outputs', 'execution_count'},
                  markdown={'cell_type', 'id', 'metadata', 'source', 'attachments'},
                  raw={'cell_type', 'id', 'metadata', 'source', 'attachments'})


def _plain(nb):
    "The notebook as plain nbformat data, without the attributes nbdev's processors add to cells."
    d = json.loads(json.dumps(nb, default=str))
    d['cells'] = [{k: v for k, v in c.items() if k in _CELL_KEYS.get(c['cell_type'], c.keys())} for c in d['cells']]
    for c in d['cells']: c.get('metadata', {}).pop('execution', None)  # execnb's timings are floats, nbformat wants strings
    return {k: v for k, v in d.items() if k in ('cells', 'metadata', 'nbformat', 'nbformat_minor')}


_pandoc_link = re.compile(r'\[([^\]\n]*)\]\(([^)\s]+)\)\{([^}\n]*)\}')


def _pandoc_links(nb):
    "Pandoc's `[text](url){attrs}` (show_doc's source link) as HTML, which plain Markdown renderers understand."
    def fix(text): return _pandoc_link.sub(lambda m: f'<a href="{m.group(2)}" {m.group(3)}>{m.group(1)}</a>', text)
    for cell in nb.cells:
        if cell.cell_type == 'markdown': cell.source = fix(cell.source)
        for out in cell.get('outputs', []):
            data = out.get('data', {})
            if 'text/markdown' in data: data['text/markdown'] = fix(data['text/markdown'])


def _frontmatter(nb):
    "The YAML frontmatter nbdev puts in a first raw cell (title, description, output-file)."
    import yaml
    for cell in nb.cells:
        if cell.cell_type == 'raw' and cell.source.lstrip().startswith('---'):
            return yaml.safe_load(cell.source.strip().strip('-')) or {}
    return {}


def _execute(ipynb, executed):
    "Run the notebook like `nbdev-test` does and save it with its outputs; return the errors raised."
    from execnb.shell import CaptureShell
    from fastcore.nbio import write_nb
    from fastcore.xtras import working_directory
    from nbdev.config import get_config
    from nbdev.process import NBProcessor
    from nbdev.test import _skip_cell
    nb = NBProcessor(ipynb, rm_directives=False, process=True).nb
    skip = _skip_cell(nb)
    shell = CaptureShell(ipynb, profile=bool(get_config(ipynb.parent).exec_profile))
    with working_directory(ipynb.parent):
        shell.run_all(nb, exc_stop=False, preproc=skip, cell_timeout=int(get_config().get('cell_timeout', 300)))
    errors = [f"{o.get('ename')}: {o.get('evalue')}" for c in nb.cells for o in c.get('outputs', []) if o.get('output_type') == 'error']
    for cell in nb.cells:  # drop nbdev's parse attributes so the file is plain nbformat
        for attr in [k for k in cell if k.endswith('_')]: del cell[attr]
    executed.parent.mkdir(parents=True, exist_ok=True)
    write_nb(nb, executed)
    return errors


def _links(text, page, pages, problems):
    "Make links offline and consistent: the hosted site -> relative, notebook files -> their pages."
    up = '../' * page.count('/')
    def fix(m):
        attr, url = m.group(1), html.unescape(m.group(2))
        if url.startswith(SITE_URL):
            path, _, frag = url[len(SITE_URL):].partition('#')
            if path.endswith('.html.md'): path = path[:-3]
            url = up + path + ('#' + frag if frag else '')
        elif not re.match(r'^[a-z][a-z0-9+.-]*:|^#|^/', url):
            path, _, frag = url.partition('#')
            target = os.path.normpath((Path(page).parent / path).as_posix()) if path else ''
            if path.endswith('.ipynb'):  # Quarto resolves links to source notebooks to their pages
                url = up + page_name(target) + ('#' + frag if frag else '')
            elif path.endswith(('.md', '.html')) and target not in pages and page_name(target) in pages:
                problems.append(f"link {path}: nbdev-docs names that page {page_name(target)} (link it as {Path(page_name(target)).name} or {Path(path).with_suffix('.ipynb').name})")
                url = up + page_name(target) + ('#' + frag if frag else '')
        if '#' in url and not re.match(r'^[a-z][a-z0-9+.-]*:', url):  # fragments follow the ids below
            path, _, frag = url.partition('#')
            url = path + '#' + frag.lower()
        return f'{attr}="{html.escape(url, quote=True)}"'
    text = re.sub(r'\b(href)="([^"]*)"', fix, text)
    # heading ids as Quarto makes them (lower case), which is what nbdev's symbol links point at
    return re.sub(r'(<h[1-6][^>]*\bid=")([^"]+)(")', lambda m: m.group(1) + m.group(2).lower() + m.group(3), text)


def _split_title_cell(nb, problems):
    "nbdev-docs turns the first Markdown cell into the title and drops the rest of it: keep that rest as its own cell."
    from fastcore.nbio import mk_cell
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != 'markdown': continue
        lines = cell.source.splitlines()
        if not any(l.startswith('# ') for l in lines): return
        head = [l for l in lines if l.startswith(('# ', '> ', '- ')) or not l.strip()]
        cut = next((j for j, l in enumerate(lines) if l.strip() and not l.startswith(('# ', '> ', '- '))), None)
        if cut is None: return
        problems.append(f"the title cell also holds {len(lines) - cut} lines of prose that nbdev-docs drops: start them with a heading or a new cell")
        cell.source = '\n'.join(lines[:cut]).rstrip()
        nb.cells.insert(i + 1, mk_cell('\n'.join(lines[cut:]), 'markdown'))
        return


def _show_doc_failure(cell, exc):
    "What to say about `cell`, which raised `exc` in the show_doc shell (nbdev-docs would stop there)."
    import ast
    try: tree = ast.parse(cell.source)
    except SyntaxError: tree = None   # an IPython magic, say: nbdev itself parses these cells differently
    imports = lambda n: isinstance(n, (ast.Import, ast.ImportFrom))
    mixed = tree is not None and any(map(imports, tree.body)) and not all(map(imports, tree.body))
    first = next((l.strip() for l in cell.source.splitlines() if l.strip() and not l.lstrip().startswith('#|')), '')
    why = ('mixes imports with code that fails alone in' if mixed else 'fails in') + " nbdev-docs' show_doc shell"
    return f"cell {getattr(cell, 'idx_', '?')} ({first[:60]!r}) {why}: {type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"


def _DocsFilter(problems):
    "nbdev's docs processors, except that a cell failing in the show_doc shell is noted in `problems`, not fatal."
    from nbdev.processors import FilterDefaults, exec_show_docs
    class tolerant_exec_show_docs(exec_show_docs):
        def __call__(self, cell):
            outputs = cell.get('outputs')  # the shell writes its own outputs into the cells it runs
            try: super().__call__(cell)
            except Exception as e:
                if outputs is not None: cell['outputs'] = outputs  # nbdev-docs would stop here (see nbdev's FAQ on imports mixed with code)
                problems.append(_show_doc_failure(cell, self.k.exc or e.__cause__ or e))
                self.k.exc = None
    class DocsFilter(FilterDefaults):
        def base_procs(self): return [tolerant_exec_show_docs if p is exec_show_docs else p for p in super().base_procs()]
    return DocsFilter()


def build_page(info, stage, outdir, nav, home):
    "Execute, process and render one notebook into OUTDIR; return its record for pages.json."
    os.environ['PASSEPARTOUT_HOME'] = home
    os.chdir(ROOT)
    start = time.monotonic()
    src_ipynb = (NBS / info['source']).with_suffix('.ipynb')
    executed = (Path(stage) / info['source']).with_suffix('.ipynb')
    record = dict(info, errors=[])
    try: record['errors'] += _execute(src_ipynb, executed)
    except Exception as e:  # the notebook could not even be run: keep the page, show nothing executed
        record['errors'].append(f'execute: {type(e).__name__}: {e}')
        shutil.copy(src_ipynb, executed)
    os.environ['IN_TEST'] = '1'  # as nbdev's docs build does
    from fastcore.nbio import read_nb
    import nbformat
    from nbdev.processors import FilterDefaults
    nb = read_nb(executed)
    problems, failures = [], []
    _split_title_cell(nb, problems)
    import warnings  # nbdev warns about every cell mixing imports and code; the ones that matter fail and are noted
    warnings.filterwarnings('ignore', message='Found cells containing imports and other code')
    try: _DocsFilter(failures)(nb)
    except Exception as e: record['errors'].append(f'nbdev processing: {type(e).__name__}: {e}')
    record['show_doc_failures'] = failures   # each one would stop nbdev-docs: an error, unless the notebook is a known case
    if info['source'] in KNOWN_SHOW_DOC_FAILURES:
        problems += failures or [f"no cell fails in the show_doc shell any more: remove {info['source']!r} from KNOWN_SHOW_DOC_FAILURES in tools/docs.py"]
    else: record['errors'] += failures
    record['nbdev_docs_problems'] = problems
    fm = _frontmatter(nb)
    nb = nbformat.reads(json.dumps(_plain(nb)), as_version=4)  # reads joins multi-line strings
    _quarto_directives(nb)
    _pandoc_links(nb)
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter
    from traitlets.config import Config
    cfg = Config()
    cfg.TagRemovePreprocessor.enabled = True
    cfg.TagRemovePreprocessor.remove_input_tags = {'docs-hide-input'}
    cfg.TagRemovePreprocessor.remove_all_outputs_tags = {'docs-hide-output'}
    exporter = HTMLExporter(config=cfg, extra_loaders=[DictLoader({'docs.html.j2': TEMPLATE})],
                            template_file='docs.html.j2', exclude_anchor_links=False)
    idx = [p['page'] for p in nav].index(info['page'])
    docs = dict(nav=nav, page=info['page'], root='../' * info['page'].count('/'), source=info['source'],
                title=fm.get('title') or info['title'], description=fm.get('description') or info['description'],
                site_title='Passepartout', prev=nav[idx - 1] if idx else None, next=nav[idx + 1] if idx + 1 < len(nav) else None)
    docs['description_html'], docs['description'] = code_spans(docs['description']), docs['description'].replace('`', '')
    body, _ = exporter.from_notebook_node(nb, resources=dict(docs=docs, metadata=dict(name=docs['title'])))
    out = Path(outdir) / info['page']
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_links(body, info['page'], {p['page'] for p in nav}, problems), encoding='utf-8')
    from nbconvert import MarkdownExporter  # the `.html.md` twin nbdev-docs publishes (the modules' `Docs:` links)
    cfg.TagRemovePreprocessor.remove_cell_tags = set()
    markdown, _ = MarkdownExporter(config=cfg).from_notebook_node(nb)
    out.with_name(out.name + '.md').write_text(f"# {docs['title']}\n\n> {docs['description']}\n\n" + markdown, encoding='utf-8')
    if fm.get('output-file') and Path(info['page']).name != fm['output-file']:
        record['errors'].append(f"page name {info['page']} differs from nbdev's output-file {fm['output-file']}")
    record['seconds'] = round(time.monotonic() - start, 1)
    return record


# ---- the site ----

SITE_CSS = """
:root { --docs-sidebar: 17rem; --docs-accent: #2c5d8f; --docs-topbar: 2.6rem; }
body.docs-page { margin: 0; padding: 0; background: #fff; }
.docs-topbar { position: sticky; top: 0; z-index: 10; display: flex; align-items: center; gap: .8rem;
  box-sizing: border-box; height: var(--docs-topbar); background: var(--docs-accent); padding: 0 1.2rem; }
.docs-topbar a { font-family: var(--jp-ui-font-family); color: #fff; font-weight: 600; font-size: 1.15rem; text-decoration: none; }
.docs-menu-button { display: none; font: 600 .95rem var(--jp-ui-font-family); color: #fff; background: transparent;
  border: 1px solid rgba(255,255,255,.6); border-radius: 4px; padding: .3rem .6rem; cursor: pointer; }
.docs-layout { display: flex; align-items: flex-start; }
.docs-side { position: sticky; top: var(--docs-topbar); flex: 0 0 var(--docs-sidebar); max-height: calc(100vh - var(--docs-topbar));
  overflow-y: auto; box-sizing: border-box; padding: 1rem .8rem; border-right: 1px solid #e3e3e3;
  font-family: var(--jp-ui-font-family); font-size: .9rem; }
.docs-search { margin: 0 0 .8rem; }
.docs-search-input { width: 100%; box-sizing: border-box; padding: .4rem .5rem; font: inherit; border: 1px solid #bbb; border-radius: 4px; }
.docs-search-input:focus { outline: 2px solid var(--docs-accent); outline-offset: -1px; }
.docs-search-status { margin: .4rem .2rem; color: #666; font-size: .8rem; }
.docs-search-results { list-style: none; margin: 0; padding: 0; }
.docs-search-results li a { display: block; padding: .35rem .5rem; border-radius: 4px; color: #333; text-decoration: none; }
.docs-search-results li a:hover, .docs-search-results li a:focus { background: #eef3f8; }
.docs-search-results .docs-hit-title { display: block; color: var(--docs-accent); font-weight: 600; }
.docs-search-results .docs-hit-page { display: block; color: #777; font-size: .75rem; }
.docs-search-results .docs-hit-text { display: block; color: #444; font-size: .8rem; line-height: 1.3; overflow-wrap: anywhere; }
.docs-search-results mark { background: #fff1a8; color: inherit; }
.docs-sidebar ol { list-style: none; margin: 0; padding: 0; }
.docs-sidebar li { margin: 0; }
.docs-sidebar li a { display: block; padding: .25rem .5rem; border-radius: 4px; color: #333; text-decoration: none; }
.docs-sidebar li a:hover { background: #eef3f8; }
.docs-sidebar li.docs-current a { background: #e1ecf7; color: var(--docs-accent); font-weight: 600; }
.docs-sidebar li.docs-section { margin-top: .8rem; padding: .25rem .5rem; font-weight: 600; color: #666; text-transform: uppercase; font-size: .75rem; }
.docs-main { flex: 1 1 auto; min-width: 0; max-width: 62rem; padding: 1rem 2rem 3rem; box-sizing: border-box; }
.docs-title { font-family: var(--jp-content-font-family); padding: 0 0 .5rem calc(var(--jp-cell-prompt-width, 64px) + var(--jp-cell-padding, 5px)); }
.docs-h1 { margin: .5rem 0 .3rem; font-family: var(--jp-content-font-family); }
.docs-description { margin: 0 0 .3rem; font-size: 1.1rem; color: #555; }
.docs-source { margin: 0; font-size: .8rem; color: #888; }
.docs-main .jp-InputPrompt, .docs-main .jp-OutputPrompt { visibility: hidden; }
.docs-main .jp-RenderedMarkdown a, .docs-main .jp-RenderedHTMLCommon a { color: var(--docs-accent); }
.docs-error { border-left: 4px solid #c62828; }
.docs-pager { display: flex; justify-content: space-between; gap: 1rem; margin-top: 2.5rem; padding-top: 1rem;
  border-top: 1px solid #e3e3e3; font-family: var(--jp-ui-font-family); }
.docs-pager a { color: var(--docs-accent); text-decoration: none; }
.docs-next { margin-left: auto; }
/* a phone: the sidebar (search and contents) folds into the Menu button above the page */
@media (max-width: 800px) {
  .docs-js .docs-menu-button { display: inline-block; }
  .docs-layout { display: block; }
  .docs-side { position: static; max-height: none; border-right: 0; border-bottom: 1px solid #e3e3e3; }
  .docs-js .docs-side { display: none; }
  .docs-js.docs-menu-open .docs-side { display: block; position: sticky; top: var(--docs-topbar); z-index: 9; background: #fff;
    max-height: calc(100vh - var(--docs-topbar)); overflow-y: auto; box-shadow: 0 4px 8px rgba(0,0,0,.15); }
  .docs-main { padding: .8rem .6rem 2rem; }
  .docs-title { padding-left: 0; }
  .docs-main .jp-InputPrompt, .docs-main .jp-OutputPrompt { display: none; }
  .docs-main .jp-Cell { padding-left: 0; padding-right: 0; }
  .docs-main .jp-InputArea-editor, .docs-main .jp-OutputArea-output pre { overflow-x: auto; }
  .docs-main .jp-RenderedHTMLCommon { padding-right: 0; }
  .docs-main .jp-RenderedHTMLCommon table { display: block; overflow-x: auto; }
  .docs-pager { flex-direction: column; }
}
"""


def write_assets(outdir):
    "One copy of the CSS every page links: JupyterLab's notebook and light theme styles, the site's layout."
    from nbconvert.exporters.templateexporter import TemplateExporter
    lab = next(Path(p) / 'lab' / 'static' for p in TemplateExporter().template_paths if (Path(p) / 'lab' / 'static' / 'index.css').exists())
    assets = Path(outdir) / 'assets'
    assets.mkdir(parents=True, exist_ok=True)
    notebook_css = (lab / 'index.css').read_text() + '\n' + (lab / 'theme-light.css').read_text()
    notebook_css += '\n.jp-InputArea { overflow: hidden; }\n.jp-Collapser { display: none; }\na.anchor-link { display: none; }\n'
    (assets / 'notebook.css').write_text(notebook_css)
    extra = (NBS / 'styles.css').read_text() if (NBS / 'styles.css').exists() else ''
    (assets / 'site.css').write_text(SITE_CSS + '\n/* nbs/styles.css */\n' + extra)


# ---- search: every section of every page in one index, loaded by assets/search.js ----

_MARK = '\x00section\x00'


def page_sections(page, title, text):
    "The sections of one built page (its HTML `text`) for the search index: dicts of page, title, heading, anchor, text."
    import bs4
    main = bs4.BeautifulSoup(text, 'html.parser').select_one('main.docs-main')
    if main is None: return []
    description = main.select_one('.docs-description')
    for el in main.select('header.docs-title, footer.docs-pager, .jp-InputPrompt, .jp-OutputPrompt, a.anchor-link, style, script'):
        el.decompose()
    for pre in main.find_all('pre'): pre.string = pre.get_text('')  # code as written, not a space between every token
    heads = [h for h in main.find_all(['h1', 'h2', 'h3', 'h4']) if h.get('id')]
    for h in heads: h.insert_before(_MARK)
    parts = main.get_text(' ').split(_MARK)
    squash = lambda s: re.sub(r'\s+', ' ', s).strip()
    out = [dict(p=page, t=title, h=title, a='', x=squash((description.get_text(' ') if description else '') + ' ' + parts[0]))]
    for h, part in zip(heads, parts[1:]):
        heading = squash(h.get_text(' ')).rstrip('¶ ').strip()
        out.append(dict(p=page, t=title, h=heading, a=h['id'], x=squash(part)[len(heading):].strip()))
    return [s for s in out if s['x'] or s['a']]


def write_search(outdir, nav):
    "assets/search.js and assets/search-index.js: every section of every page built in OUTDIR."
    outdir = Path(outdir)
    shutil.copy(Path(__file__).with_name('docs_search.js'), outdir / 'assets' / 'search.js')
    entries = [s for p in nav if (outdir / p['page']).exists()
               for s in page_sections(p['page'], p['title'], (outdir / p['page']).read_text(encoding='utf-8'))]
    index = dict(pages=[p['page'] for p in nav if (outdir / p['page']).exists()], entries=entries)
    (outdir / 'assets' / 'search-index.js').write_text(
        'window.docsSearchIndex = ' + json.dumps(index, ensure_ascii=False, separators=(',', ':')) + ';\n', encoding='utf-8')
    return index


def _sections(nav):
    "Mark the first page of each sub-folder with its section name for the sidebar."
    seen = ''
    for p in nav:
        folder = p['page'].rpartition('/')[0]
        p['section'] = folder if folder != seen else ''
        seen = folder
    return nav


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument('outdir', nargs='?', default=str(ROOT / '_site'))
    ap.add_argument('--jobs', type=int, default=min(2, os.cpu_count() or 1), help='notebooks built in parallel')
    ap.add_argument('--only', nargs='*', help='build only these sources (e.g. 02_signals.md); the sidebar still lists all')
    args = ap.parse_args(argv)
    start = time.monotonic()
    outdir = Path(args.outdir).resolve()
    nav = _sections([dict(p) for p in pages()])
    missing = [p['source'] for p in nav if not (NBS / p['source']).with_suffix('.ipynb').exists()]
    if missing: sys.exit(f'docs: not built (run tools/build.sh): {missing}')
    todo = [p for p in nav if not args.only or p['source'] in args.only or Path(p['source']).name in args.only]
    if outdir.exists() and not args.only: shutil.rmtree(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    write_assets(outdir)
    nav_public = [dict(page=p['page'], title=p['title'], section=p['section']) for p in nav]
    with tempfile.TemporaryDirectory(prefix='docs-') as tmp:
        ctx = mp.get_context('spawn')
        with ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx, max_tasks_per_child=1) as pool:
            futures = []
            for i, info in enumerate(todo):
                home = Path(tmp) / f'home{i}'
                home.mkdir()
                futures.append(pool.submit(build_page, {k: info[k] for k in ('source', 'page', 'title', 'description')},
                                           str(Path(tmp) / 'stage'), str(outdir), nav_public, str(home)))
            records = []
            for f, info in zip(futures, todo):
                try: records.append(f.result())
                except Exception as e: records.append(dict(info, errors=[f'build: {type(e).__name__}: {e}']))
    (outdir / 'pages.json').write_text(json.dumps(records, indent=1) + '\n')
    index = write_search(outdir, nav)
    failed = [r for r in records if r['errors']]
    for r in records:
        flag = 'FAIL' if r['errors'] else 'ok'
        print(f"docs: {flag:4} {r['page']:24} {r.get('seconds', '?'):>6}s  {r['title']}")
        for e in r['errors']: print(f"        {e}", file=sys.stderr)
        for e in r.get('nbdev_docs_problems', []): print(f"        warning (nbdev-docs): {e}", file=sys.stderr)
    print(f"docs: search index of {len(index['entries'])} sections from {len(index['pages'])} pages")
    print(f'docs: {len(records)} pages in {outdir} ({time.monotonic() - start:.0f}s); open {outdir / "index.html"}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
