import pytest

from maxcode.errors import BudgetExceeded
from maxcode.llm.cache import ResponseCache

from .helpers import client_for

MSGS = [{"role": "user", "content": "```cpp\nint main() { return 0; }\n```"}]


def test_call_budget_refuses_before_calling(fake_llm_server, api_keys):
    client = client_for(fake_llm_server, budget={"max_calls": 3})
    client.complete(MSGS, n=2)
    with pytest.raises(
        BudgetExceeded, match=r"calls at 4 of limit 3.*llm.generator.budget.max_calls"
    ):
        client.complete(MSGS, n=2, seed=1)
    assert fake_llm_server.count() == 2


def test_token_and_cost_budgets_stop_the_next_request(fake_llm_server, api_keys):
    client = client_for(fake_llm_server, budget={"max_tokens": 10})
    client.complete(MSGS)  # admitted: nothing spent yet
    with pytest.raises(BudgetExceeded) as err:
        client.complete(MSGS, seed=1)
    assert err.value.what == "tokens" and err.value.spent > 10
    money = client_for(fake_llm_server, budget={"max_cost_usd": 1e-6})
    money.complete(MSGS)
    with pytest.raises(BudgetExceeded, match="cost_usd"):
        money.complete(MSGS, seed=1)


def test_replay_stops_where_the_original_run_stopped(fake_llm_server, api_keys, tmp_path):
    cache = ResponseCache(tmp_path / "c.sqlite")

    def run() -> int:
        client = client_for(fake_llm_server, cache=cache, budget={"max_calls": 5})
        done = 0
        with pytest.raises(BudgetExceeded):
            for step in range(10):
                client.complete(MSGS, n=2, seed=step)
                done += 1
        return done

    assert run() == 2
    calls = fake_llm_server.count()
    assert run() == 2 and fake_llm_server.count() == calls  # hits count at original price
