"""The daemon's state files (`write_secret`): a reader never sees a part of one, a failed write leaves the old one."""
import os, threading
from pathlib import Path
import pytest
from passepartout.daemon_client import write_secret


def test_a_reader_never_sees_an_empty_or_half_written_token(tmp_path):
    "A client reading the token while a restarting daemon rewrites it reads one whole token or the other, never ''."
    path, tokens = tmp_path / 'daemon.token', ['a' * 4096, 'b' * 8192]
    write_secret(path, tokens[0])
    done, seen = threading.Event(), set()
    def writer():
        for i in range(400): write_secret(path, tokens[i % 2])
        done.set()
    thread = threading.Thread(target=writer); thread.start()
    while not done.is_set(): seen.add(path.read_text())
    thread.join()
    assert seen <= set(tokens), sorted(len(s) for s in seen - set(tokens))
    assert sorted(p.name for p in tmp_path.iterdir()) == ['daemon.token']


def test_a_write_that_fails_leaves_the_old_file_and_no_part(tmp_path, monkeypatch):
    "The rename never happens when writing fails (here: the disk is full at fsync); the old file stays whole."
    path = tmp_path / 'signal-held.json'
    write_secret(path, '{"1": "tok"}')
    def full(fd): raise OSError(28, 'No space left on device')
    monkeypatch.setattr(os, 'fsync', full)
    with pytest.raises(OSError): write_secret(path, '{"1": "tok", "2": "tok2"}')
    assert path.read_text() == '{"1": "tok"}'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['signal-held.json']
    assert oct(path.stat().st_mode & 0o777) == '0o600'
