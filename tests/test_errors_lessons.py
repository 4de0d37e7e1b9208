"""The table behind the lesson of `nbs/01_errors.md`: what each error carries and where it sits in the hierarchy.

The notebook keeps one showing example; the rows here are the rest of what it once asserted in place.
"""
import pytest
from passepartout.errors import (PassepartoutError, PipelineError, LLMError, BudgetError, GateError,
                                 ProtocolError, SetupError)


@pytest.mark.parametrize('err, fields, expected', [
    (LLMError("all providers failed", provider="openai", cascade=["openai", "ollama"], attempts=2),
     ('message', 'provider', 'cascade', 'attempts'), ("all providers failed", "openai", ("openai", "ollama"), 2)),
    (BudgetError("session cap reached", remaining=0.01, requested=0.05), ('remaining', 'requested'), (0.01, 0.05)),
    (SetupError("PASSEPARTOUT_MAX_DEPTH='ten' is not a valid int", setting='PASSEPARTOUT_MAX_DEPTH', value='ten'),
     ('setting', 'value'), ('PASSEPARTOUT_MAX_DEPTH', 'ten')),
], ids=['llm', 'budget', 'setup'])
def test_an_error_carries_its_fields(err, fields, expected):
    assert tuple(getattr(err, f) for f in fields) == expected


@pytest.mark.parametrize('err, parents, not_parents', [
    (LLMError("x"), (PipelineError, PassepartoutError), ()),
    (BudgetError("x", remaining=0.01, requested=0.05), (PipelineError,), ()),
    (GateError("denied by shell", gate="shell"), (PipelineError,), ()),
    (ProtocolError("bad frame"), (PassepartoutError,), (PipelineError,)),
    (SetupError("bad", setting='S', value='v'), (ValueError, PassepartoutError), (PipelineError,)),
], ids=['llm', 'budget', 'gate', 'protocol', 'setup'])
def test_where_an_error_sits(err, parents, not_parents):
    assert all(isinstance(err, p) for p in parents)
    assert not any(isinstance(err, p) for p in not_parents)


@pytest.mark.parametrize('err, text', [
    (BudgetError("session cap reached", remaining=0.01, requested=0.05), "session cap reached"),
    (GateError("denied by shell", gate="shell"), "denied by shell"),
], ids=['budget', 'gate'])
def test_str_is_the_message(err, text):
    assert str(err) == text
