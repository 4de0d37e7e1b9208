"""Semantic recall (`41a_embeddings`): the loading code on a tiny model made here, the vector cache, only the
memory as it is now, purge dropping the vectors, and (when the `[embeddings]` extra is installed) the shipped model
finding paraphrases that full text cannot."""
import numpy as np
import pytest
from safetensors.numpy import save_file
from tokenizers import Tokenizer, models, pre_tokenizers

import passepartout.embeddings as embeddings
from passepartout.embeddings import EmbeddingsMissing, load_static, shipped_model
from passepartout.memory_store import MemoryStore

VOCAB = ['[UNK]', 'plumber', 'pipes', 'release', 'monday', 'garden', 'plants']
ROWS = [[0, 0, 0], [1, .1, 0], [.9, .2, 0], [0, 0, 1], [0, .3, 1], [0, 1, 0], [.1, .9, 0]]


@pytest.fixture
def tiny(tmp_path):
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(VOCAB)}, unk_token='[UNK]'))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(tmp_path / 'tokenizer.json'))
    save_file({'embedding.weight': np.array(ROWS, dtype=np.float16)}, str(tmp_path / 'w.safetensors'))
    return load_static(tmp_path / 'tokenizer.json', tmp_path / 'w.safetensors', 'tiny')


def test_loading_a_model_made_here(tiny, tmp_path):
    v = tiny.embed(['plumber pipes', 'garden', '', 'unknown words only'])
    assert v.dtype == np.float32 and v.shape == (4, 3)
    assert np.allclose(np.linalg.norm(v[:2], axis=1), 1) and not v[2:].any()
    save_file({'a': np.zeros((2, 2), np.float32), 'b': np.zeros((2, 2), np.float32)}, str(tmp_path / 'two.safetensors'))
    with pytest.raises(ValueError, match='expected one 2-D matrix'): load_static(tmp_path / 'tokenizer.json', tmp_path / 'two.safetensors')


def test_missing_extra_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(embeddings, 'SHIPPED', ('no_such_package_here', 't.json', 'w.safetensors'))
    monkeypatch.setattr(embeddings, '_shipped', {})
    with pytest.raises(EmbeddingsMissing, match=r"pip install 'passepartout\[embeddings\]'"): shipped_model()


def test_vectors_are_cached_by_version_and_only_the_memory_now_counts(tiny, tmp_path):
    store = MemoryStore(tmp_path / 'm.db')
    store.remember('person:bob', 'Bob the plumber'); store.remember('note:g', 'water the garden plants')
    calls = []
    real = tiny.embed
    tiny.embed = lambda texts: (calls.append(len(texts)), real(texts))[1]
    assert [h.object.id for h in store.recall_semantic('pipes', embedder=tiny)][0] == 'person:bob'
    assert calls == [2, 1]                                                       # two objects, then the query
    assert store.db.execute('SELECT count(*) FROM embeddings').fetchone()[0] == 2
    store.recall_semantic('pipes', embedder=tiny)
    assert calls == [2, 1, 1]                                                    # cached: only the query
    store.snapshot('s')
    again = MemoryStore(tmp_path / 'm.db', read_only=True)
    again.recall_semantic('pipes', embedder=tiny)
    assert calls == [2, 1, 1, 1]                                                 # read from the table in another store
    store.remember('person:bob', 'Bob waters the garden')                       # a new version: embedded once
    assert all(h.object.content != 'Bob the plumber' for h in store.recall_semantic('pipes', embedder=tiny))
    assert calls == [2, 1, 1, 1, 1, 1]
    store.rollback()
    assert store.recall_semantic('pipes', embedder=tiny)[0].object.content == 'Bob the plumber'
    store.purge('note:g')
    assert store.db.execute("SELECT count(*) FROM sqlite_master WHERE name = 'embeddings'").fetchone()[0] == 0
    assert store.recall_semantic('garden', embedder=tiny)[0].object.id == 'person:bob'   # recomputed when needed


def test_the_shipped_model_finds_paraphrases(tmp_path):
    pytest.importorskip('wordllama')
    model = shipped_model()
    store = MemoryStore(tmp_path / 'm.db')
    notes = {'fact:release': 'The release moved to Monday', 'person:bob': 'Bob is the plumber, call him about the leaking sink',
             'trip:lisbon': 'Flight to Lisbon on the 3rd, seat 14A', 'fact:dentist': 'The dentist appointment is Thursday at 9',
             'fact:wifi': 'Our wifi password is on the fridge'}
    for id, text in notes.items(): store.remember(id, text)
    questions = {'when do we ship the new version?': 'fact:release', 'who fixes the pipes': 'person:bob',
                 'trip to Portugal': 'trip:lisbon', 'teeth checkup': 'fact:dentist', 'internet access code': 'fact:wifi'}
    for q, want in questions.items():
        assert store.recall_semantic(q, embedder=model)[0].object.id == want, q
    assert sum(bool(store.recall(q)) and store.recall(q)[0].object.id == want for q, want in questions.items()) < 5


def test_the_agent_recalls_by_meaning_when_asked(tmp_path, monkeypatch):
    from passepartout.app import build_agent
    from passepartout.errors import SetupError
    from passepartout.reason import ScriptedProvider
    from passepartout.signals import reply
    (tmp_path / 'ws').mkdir()
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home')); monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path / 'ws'))
    monkeypatch.setenv('PASSEPARTOUT_RECALL', 'vectors')
    with pytest.raises(SetupError, match="PASSEPARTOUT_RECALL='vectors' is not a recall method"): build_agent(provider=ScriptedProvider([]))
    monkeypatch.setattr(embeddings, 'SHIPPED', ('no_such_package_here', 't.json', 'w.safetensors')); monkeypatch.setattr(embeddings, '_shipped', {})
    monkeypatch.setenv('PASSEPARTOUT_RECALL', 'hybrid')
    with pytest.raises(EmbeddingsMissing): build_agent(provider=ScriptedProvider([]))
    monkeypatch.undo()
    pytest.importorskip('wordllama')
    (tmp_path / 'ws').mkdir(exist_ok=True)
    monkeypatch.setenv('PASSEPARTOUT_HOME', str(tmp_path / 'home')); monkeypatch.setenv('PASSEPARTOUT_WORKSPACE', str(tmp_path / 'ws'))
    for mode, found in (('fts', False), ('embeddings', True)):
        monkeypatch.setenv('PASSEPARTOUT_RECALL', mode)
        agent = build_agent(provider=ScriptedProvider([lambda req: reply(req.system)]))
        agent.memory.remember('person:bob', 'Bob is our plumber')
        assert ('Bob is our plumber' in agent.send('who fixes the pipes?', session=mode).reply) is found, mode
