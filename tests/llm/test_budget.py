import pytest

from maxcode.errors import BudgetExceeded
from maxcode.llm.cache import ResponseCache
from maxcode.llm.client import BudgetTracker, prompt_token_bound
from maxcode.llm.config import LLMBudget

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


def test_token_and_cost_budgets_admit_a_call_only_if_its_worst_case_fits(fake_llm_server, api_keys):
    bound = prompt_token_bound(MSGS) + 16  # the prompt's bound plus max_tokens of output
    client = client_for(fake_llm_server, max_tokens=16, budget={"max_tokens": bound + 5})
    client.complete(MSGS)  # admitted: its worst case fits
    with pytest.raises(BudgetExceeded, match="next request may use") as err:
        client.complete(MSGS, seed=1)  # spent + worst case would cross the limit
    assert err.value.what == "tokens" and fake_llm_server.count() == 1
    with pytest.raises(BudgetExceeded):  # a limit below one call's worst case: no call at all
        client_for(fake_llm_server, budget={"max_tokens": 100}).complete(MSGS)
    assert fake_llm_server.count() == 1

    worst = client.worst_case(MSGS).cost_usd  # 3 / 15 USD per 1M tokens (helpers)
    money = client_for(fake_llm_server, max_tokens=16, budget={"max_cost_usd": 1.5 * worst})
    money.complete(MSGS)
    with pytest.raises(BudgetExceeded, match=r"cost_usd|next request may cost"):
        money.complete(MSGS, seed=1)
    assert 0 < money.budget.spent.cost_usd <= 1.5 * worst  # stopped before crossing the cap


def test_a_shared_run_budget_stops_every_role(fake_llm_server, api_keys):
    run = BudgetTracker("run", LLMBudget(max_calls=3), fix="raise --budget-{field}")
    generator = client_for(fake_llm_server, run_budget=run)
    critic = client_for(fake_llm_server, role="critic", run_budget=run)
    generator.complete(MSGS, n=2)
    with pytest.raises(BudgetExceeded, match="raise --budget-max_calls"):
        critic.complete(MSGS, n=2, seed=1)
    critic.complete(MSGS, seed=2)
    assert run.spent.calls == 3 and run.pending.calls == 0


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
