"""Shared pytest configuration.

nbval runs every code cell of a notebook in a real Jupyter kernel but knows nothing of nbdev's
`#| eval: false`; cells carrying it are skipped here so both runners agree on what a lesson is.
"""
import pytest

def pytest_collection_modifyitems(config, items):
    for item in items:
        cell = getattr(item, 'cell', None)
        if cell is None: continue
        src = cell.get('source', '') if isinstance(cell, dict) else getattr(cell, 'source', '')
        if isinstance(src, list): src = ''.join(src)
        if any(line.replace(' ', '') in ('#|eval:false',) for line in src.splitlines()):
            item.add_marker(pytest.mark.skip(reason='#| eval: false'))
