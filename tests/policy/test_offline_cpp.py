"""The offline C++ policy: each transformation keeps programs compiling and their output
unchanged; the policy follows the observation and its RNG."""

from __future__ import annotations

import random
import shutil
import subprocess
from pathlib import Path

import pytest

from maxcode.evaluate.result import EvalResult, Status, Timing
from maxcode.policy import cpp_transforms as ct
from maxcode.policy.offline_cpp import OfflineCppPolicy
from maxcode.search.types import Attempt, Critique, Observation
from maxcode.tasks.builtin import BUILTIN_CPP_DIR, list_builtin_cpp, load_builtin_problem
from maxcode.tasks.model import Task

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def compile_and_run(tmp_path: Path, source: str, stdin: str, name: str = "prog") -> str:
    src = tmp_path / f"{name}.cpp"
    binary = tmp_path / name
    src.write_text(source)
    proc = subprocess.run(
        ["g++", "-O1", "-std=c++17", "-o", str(binary), str(src)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"does not compile:\n{proc.stderr}\n{source}"
    run = subprocess.run([str(binary)], input=stdin, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    return run.stdout


# One small program per transformation, with an input; the rewrite must print the same.
CASES = {
    "fast_io": (
        """#include <iostream>
using namespace std;
int main() {
    int n; cin >> n; long long s = 0;
    for (int i = 0; i < n; i++) { int x; cin >> x; s += x; cout << s << "\\n"; }
}
""",
        "5\n1 2 3 4 5\n",
    ),
    "endl_to_newline": (
        """#include <iostream>
int main() {
    int n; std::cin >> n;
    for (int i = 0; i < n; i++) std::cout << i * i << std::endl;
    std::cout << "done" << std::endl;
}
""",
        "4\n",
    ),
    "reserve_vectors": (
        """#include <cstdio>
#include <vector>
int main() {
    int n; if (scanf("%d", &n) != 1) return 1;
    std::vector<long long> v;
    for (int i = 1; i <= n; i++) v.push_back(1LL * i * i);
    std::vector<int> odd;
    for (int i = 0; i < (int)v.size(); i++) { if (v[i] & 1) odd.push_back(i); }
    printf("%zu %zu %lld\\n", v.size(), odd.size(), v.back());
}
""",
        "1000\n",
    ),
    "const_ref_params": (
        """#include <cstdio>
#include <string>
#include <vector>
using namespace std;
long long total(vector<int> v, string label) {
    long long s = 0;
    for (size_t i = 0; i < v.size(); i++) s += v[i];
    return s + (long long)label.size();
}
int main() {
    vector<int> v(1000);
    for (int i = 0; i < 1000; i++) v[i] = i;
    printf("%lld\\n", total(v, "abc"));
}
""",
        "",
    ),
    "hoist_invariant_calls": (
        """#include <cmath>
#include <cstdio>
#include <cstring>
char s[100];
int main() {
    if (scanf("%99s", s) != 1) return 1;
    int upper = 0; double acc = 0; double base = 1.5;
    for (size_t i = 0; i < strlen(s); i++) {
        if (s[i] >= 'a') upper++;
        acc += pow(base, 3) * i;
    }
    printf("%d %.3f\\n", upper, acc);
}
""",
        "helloWorld\n",
    ),
    "loop_interchange": (
        """#include <cstdio>
int a[50][60];
double c[50][60];
int main() {
    for (int i = 0; i < 50; i++) for (int j = 0; j < 60; j++) a[i][j] = i * 7 + j;
    long long s = 0;
    for (int j = 0; j < 60; j++) {
        for (int i = 0; i < 50; i++) {
            s += a[i][j] * (j + 1);
        }
    }
    for (int j = 0; j < 60; j++)
        for (int i = 0; i < 50; i++)
            c[i][j] = a[i][j] * 0.5 + c[i][j];
    printf("%lld %.1f\\n", s, c[49][59]);
}
""",
        "",
    ),
    "target_pragmas": (
        """#include <cstdio>
#include <vector>
int main() {
    std::vector<double> x(1000);
    for (int i = 0; i < 1000; i++) x[i] = i * 0.1;
    double s = 0;
    for (int i = 0; i < 1000; i++) s += x[i] * x[i] + 0.5 * x[i];
    printf("%.17g\\n", s);
}
""",
        "",
    ),
    "map_to_unordered": (
        """#include <iostream>
#include <map>
#include <set>
#include <string>
using namespace std;
int main() {
    map<string, int> count;
    set<int> seen;
    string w; int i = 0;
    while (cin >> w) { count[w]++; seen.insert(i++ % 3); }
    cout << count["a"] << " " << count.size() << " " << seen.count(2) << "\\n";
}
""",
        "a b a c a b\n",
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_transformation_compiles_and_keeps_output(tmp_path, name):
    source, stdin = CASES[name]
    out = ct.TRANSFORMS[name].apply(source)
    assert out is not None and out != source, f"{name} should apply"
    assert compile_and_run(tmp_path, out, stdin, "new") == compile_and_run(
        tmp_path, source, stdin, "old"
    )


def test_transformations_say_what_they_changed():
    assert "sync_with_stdio(false)" in ct.fast_io(CASES["fast_io"][0])
    assert "endl" not in ct.endl_to_newline(CASES["endl_to_newline"][0])
    reserved = ct.reserve_vectors(CASES["reserve_vectors"][0])
    assert "v.reserve(" in reserved and "odd.reserve(" in reserved
    assert "const vector<int>& v" in ct.const_ref_params(CASES["const_ref_params"][0])
    hoisted = ct.hoist_invariant_calls(CASES["hoist_invariant_calls"][0])
    assert "= strlen(s);" in hoisted and "= pow(base, 3);" in hoisted
    swapped = ct.loop_interchange(CASES["loop_interchange"][0])
    assert swapped.count("for (int i = 0; i < 50; i++)") == 3  # both column loops now row-major
    unordered = ct.map_to_unordered(CASES["map_to_unordered"][0])
    assert (
        "unordered_map<string, int> count" in unordered and "unordered_set<int> seen" in unordered
    )
    assert "#include <unordered_map>" in unordered and "#include <unordered_set>" in unordered
    pragmas = ct.target_pragmas(CASES["target_pragmas"][0])
    assert pragmas.index('#pragma GCC target("avx2")') > pragmas.index("#include <vector>")


# Programs where a transformation would change behaviour or not compile: each must decline.
DECLINED = {
    "fast_io": '#include <iostream>\n#include <cstdio>\nint main() { int x; std::cin >> x; printf("%d", x); }\n',
    "const_ref_params": (
        "#include <vector>\nint f(std::vector<int> v) { v.push_back(1); return v.size(); }\n"
        "int main() { std::vector<int> a; return f(a); }\n"
    ),
    "map_to_unordered": (
        "#include <map>\n#include <cstdio>\nint main() { std::map<int,int> m; m[2] = 1; m[1] = 2;\n"
        '  for (auto& kv : m) printf("%d", kv.first); }\n'
    ),
    "hoist_invariant_calls": (
        '#include <cstring>\nchar s[9] = "abcdef";\nint main() { int n = 0;\n'
        "  for (int i = 0; i < (int)strlen(s); i++) { s[i + 1] = 0; n++; } return n; }\n"
    ),
    "loop_interchange": (
        "double a[8][8]; double s;\nint main() {\n  for (int j = 0; j < 8; j++)\n"
        "    for (int i = 0; i < 8; i++) s += a[i][j];\n  return s > 0; }\n"
    ),
    "reserve_vectors": (
        "#include <vector>\nint main() { std::vector<int> v; int n = 5;\n"
        "  for (int i = 0; i < n; i++) { v.push_back(i); n--; } return v.size(); }\n"
    ),
}


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_unsafe_rewrites_are_declined(name):
    assert ct.TRANSFORMS[name].apply(DECLINED[name]) is None


def test_loop_interchange_declines_dependences_and_triangles():
    dependent = (
        "int a[9][9];\nint main() { for (int i = 1; i < 9; i++) for (int j = 0; j < 8; j++)\n"
        "  a[j][i] = a[j + 1][i - 1] + 1; return a[3][3]; }\n"
    )
    triangle = (
        "int a[9][9]; long s;\nint main() { for (int j = 0; j < 9; j++) for (int i = j; i < 9; i++)\n"
        "  s += a[i][j]; return s; }\n"
    )
    assert ct.loop_interchange(dependent) is None
    assert ct.loop_interchange(triangle) is None


def test_every_applicable_transformation_compiles_on_the_suite(tmp_path):
    """Each single transformation and all applicable ones together, on every slow.cpp."""
    checked = 0
    for pid in list_builtin_cpp():
        source = (BUILTIN_CPP_DIR / pid / "slow.cpp").read_text()
        names = [n for n, t in ct.TRANSFORMS.items() if t.apply(source) is not None]
        for subset in [[n] for n in names] + ([names] if len(names) > 1 else []):
            out, applied = ct.apply_transforms(source, subset)
            assert applied == subset, (pid, subset, applied)
            path = tmp_path / f"{pid}.cpp"
            path.write_text(out)
            proc = subprocess.run(
                ["g++", "-std=c++17", "-O1", "-c", "-o", str(tmp_path / "out.o"), str(path)],
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert proc.returncode == 0, f"{pid} {subset}:\n{proc.stderr}"
            checked += 1
    assert checked >= 15


def test_suite_helpful_transformations_are_found():
    for pid in list_builtin_cpp():
        problem = load_builtin_problem(pid)
        for name in problem.helpful_transformations:
            assert ct.TRANSFORMS[name].apply(problem.slow_source) is not None, (pid, name)


def test_unknown_transformation_is_an_error():
    with pytest.raises(ValueError, match="unknown C\\+\\+ transformations \\['vectorize'\\]"):
        ct.apply_transforms("int main() {}", ["vectorize"])
    with pytest.raises(ValueError, match=r"OfflineCppPolicy\.transforms: unknown"):
        OfflineCppPolicy(transforms=("vectorize",))


# ---------------------------------------------------------------- policy guidance
IO_AND_MAP = """#include <iostream>
#include <map>
using namespace std;
long long total(map<int, int> m, int k) { return m.count(k) ? m.at(k) : 0; }
int main() {
    int n; cin >> n;
    map<int, int> seen;
    for (int i = 0; i < n; i++) { int x; cin >> x; seen[x]++; }
    cout << seen.size() << endl;
    cout << total(seen, 3) << endl;
}
"""


def task_of(source: str, language: str = "cpp") -> Task:
    return Task(task_id="t", suite="unit", language=language, reference_source=source)


def ok_result(speedup: float) -> EvalResult:
    return EvalResult(Status.OK, timing=Timing("wall", "s", 1.0 / speedup, 1.0))


def attempt(source, status=Status.OK, applied=(), cumulative=None, critique=None, speedup=1.2):
    result = ok_result(speedup) if status is Status.OK else EvalResult(status, reason="x")
    return Attempt(
        step=0,
        index=0,
        candidate_id=str(hash(source)),
        source=source,
        result=result,
        reward=speedup if status is Status.OK else 0.0,
        critique=Critique(critique, "offline-critic/1", True) if critique else None,
        meta={"applied": list(applied), "transformations": list(cumulative or applied)},
    )


def observe(task, trajectory=(), best=None, include_critique=True) -> Observation:
    return Observation(
        task=task,
        step=len(trajectory),
        depth=4,
        trajectory=list(trajectory),
        best=best,
        best_discounted_reward=best.reward if best else 0.0,
        include_critique=include_critique,
        method="unit",
    )


def test_without_history_proposes_k_distinct_rewrites_of_the_reference():
    policy = OfflineCppPolicy(max_per_proposal=3)
    proposals = policy.propose(observe(task_of(IO_AND_MAP)), 5, random.Random(0))
    assert len(proposals) == 5
    sources = [p.source for p in proposals]
    assert all(sources) and len(set(sources)) == 5 and IO_AND_MAP not in sources
    for p in proposals:
        assert p.meta["base"] == "reference"
        assert p.meta["applied"] and set(p.meta["applied"]) <= set(ct.TRANSFORMS)
        assert p.meta["transformations"] == sorted(p.meta["applied"])


def test_by_default_one_rewrite_per_step_composed_on_the_best():
    policy = OfflineCppPolicy()
    task = task_of(IO_AND_MAP)
    first = policy.propose(observe(task), 4, random.Random(0))
    assert all(len(p.meta["applied"]) == 1 for p in first if p.source)
    fast = next(p for p in first if p.meta.get("applied") == ["fast_io"])
    best = attempt(fast.source, applied=["fast_io"], speedup=1.3)
    second = policy.propose(observe(task, [best], best), 4, random.Random(1))
    for p in second:
        if p.source:
            assert len(p.meta["applied"]) == 1 and "fast_io" in p.meta["transformations"]


def test_without_best_builds_on_the_fastest_correct_attempt_shown():
    task = task_of(IO_AND_MAP)
    slow = attempt(ct.endl_to_newline(IO_AND_MAP), applied=["endl_to_newline"], speedup=0.9)
    fast = attempt(ct.fast_io(IO_AND_MAP), applied=["fast_io"], speedup=1.4)
    wrong = attempt("x", Status.WRONG_ANSWER, applied=["map_to_unordered"])
    proposals = OfflineCppPolicy().propose(observe(task, [slow, fast, wrong]), 2, random.Random(0))
    assert all(p.meta["base"] == fast.candidate_id for p in proposals if p.source)


def test_same_seed_same_proposals_and_seed_matters():
    policy = OfflineCppPolicy()
    obs = observe(task_of(IO_AND_MAP))

    def run(seed):
        return [p.meta["applied"] for p in policy.propose(obs, 3, random.Random(seed))]

    assert run(1) == run(1)
    assert len({tuple(map(tuple, run(s))) for s in range(8)}) > 1


def test_builds_on_best_and_never_repeats_a_tried_set():
    policy = OfflineCppPolicy()
    task = task_of(IO_AND_MAP)
    best_source = ct.fast_io(IO_AND_MAP)
    best = attempt(best_source, applied=["fast_io"])
    tried = attempt(
        ct.endl_to_newline(best_source),
        applied=["endl_to_newline"],
        cumulative=["endl_to_newline", "fast_io"],
        speedup=1.1,
    )
    for seed in range(5):
        proposals = policy.propose(observe(task, [best, tried], best), 4, random.Random(seed))
        for p in proposals:
            if p.source is None:
                continue
            assert p.meta["base"] == best.candidate_id
            assert "fast_io" in p.meta["transformations"] and "fast_io" not in p.meta["applied"]
            assert p.meta["transformations"] != ["endl_to_newline", "fast_io"]
            assert "sync_with_stdio(false)" in p.source


def test_drops_transformations_whose_candidates_failed():
    policy = OfflineCppPolicy()
    task = task_of(IO_AND_MAP)
    broken = attempt(
        ct.map_to_unordered(IO_AND_MAP), Status.WRONG_ANSWER, applied=["map_to_unordered"]
    )
    compile_fail = attempt(
        "x", Status.COMPILE_ERROR, applied=["const_ref_params", "endl_to_newline"]
    )
    for seed in range(5):
        for p in policy.propose(observe(task, [broken, compile_fail]), 6, random.Random(seed)):
            if p.source is not None:
                assert not {"map_to_unordered", "const_ref_params", "endl_to_newline"} & set(
                    p.meta["transformations"]
                )


def test_a_transformation_that_also_passed_is_not_dropped():
    task = task_of(IO_AND_MAP)
    failed = attempt("x", Status.COMPILE_ERROR, applied=["fast_io", "map_to_unordered"])
    passed = attempt(ct.fast_io(IO_AND_MAP), applied=["fast_io"])
    proposals = OfflineCppPolicy().propose(
        observe(task, [failed, passed], passed), 3, random.Random(0)
    )
    assert all("fast_io" in p.meta["transformations"] for p in proposals if p.source)


def test_critique_diagnosis_steers_the_choice():
    task = task_of(IO_AND_MAP)
    policy = OfflineCppPolicy(max_per_proposal=1, preferred_weight=1000.0)
    io = attempt(
        IO_AND_MAP + " ",
        Status.WRONG_ANSWER,
        critique="Likely bottleneck: I/O-bound (endl flushes).",
    )
    mem = attempt(
        IO_AND_MAP + "  ",
        Status.WRONG_ANSWER,
        critique="Constant-factor overhead: tree lookups and copies.",
    )
    firsts_io = {
        policy.propose(observe(task, [io]), 1, random.Random(s))[0].meta["applied"][0]
        for s in range(10)
    }
    firsts_cf = {
        policy.propose(observe(task, [mem]), 1, random.Random(s))[0].meta["applied"][0]
        for s in range(10)
    }
    assert firsts_io <= {"fast_io", "endl_to_newline"}
    assert firsts_cf <= {
        "map_to_unordered",
        "const_ref_params",
        "hoist_invariant_calls",
        "reserve_vectors",
    }
    ignored = {
        policy.propose(observe(task, [io], include_critique=False), 1, random.Random(s))[0].meta[
            "applied"
        ][0]
        for s in range(10)
    }
    assert ignored - {"fast_io", "endl_to_newline"}, "with critiques off the choice is not steered"


def test_nothing_applicable_is_reported_as_unsupported():
    policy = OfflineCppPolicy()
    plain = (
        '#include <cstdio>\n#pragma GCC optimize("O2")\nint main() { printf("%d\\n", 6 * 7); }\n'
    )
    proposals = policy.propose(observe(task_of(plain)), 3, random.Random(0))
    assert len(proposals) == 3
    assert all(p.source is None and p.status_hint == "unsupported" for p in proposals)
    assert "no transformation applies to reference" in proposals[0].reason
    cuda = policy.propose(observe(task_of("import torch", "cuda")), 2, random.Random(0))
    assert all(p.source is None and "C++ only" in p.reason for p in cuda)


def test_fewer_untried_rewrites_than_k_are_padded_with_reasons():
    source = CASES["endl_to_newline"][0]
    proposals = OfflineCppPolicy().propose(observe(task_of(source)), 6, random.Random(0))
    real = [p for p in proposals if p.source is not None]
    assert 1 <= len(real) < 6 and len(proposals) == 6
    assert all("distinct untried rewrites" in p.reason for p in proposals if p.source is None)


def test_policy_fixes_suite_problems_and_keeps_their_output(tmp_path):
    """End to end on real problems: the full transformation set reproduces the trusted output."""
    for pid, stdin in [("io_prefix_sums_endl", "3\n1 2 3\n"), ("mem_matmul_ijk", "40 12345\n")]:
        problem = load_builtin_problem(pid)
        proposals = OfflineCppPolicy(max_per_proposal=3).propose(
            observe(task_of(problem.slow_source)), 8, random.Random(0)
        )
        full = max((p for p in proposals if p.source), key=lambda p: len(p.meta["applied"]))
        assert set(problem.helpful_transformations) <= set(full.meta["applied"])
        expected = compile_and_run(tmp_path, problem.fast_source, stdin, f"{pid}_fast")
        assert compile_and_run(tmp_path, full.source, stdin, f"{pid}_new") == expected


@pytest.mark.slow
def test_with_the_real_evaluator_and_critic(tmp_path):
    """Policy, sandboxed C++ evaluator and offline critic together on one suite problem."""
    from maxcode.critique.offline import OfflineCritic
    from maxcode.evaluate.cpp import CppEvalConfig, CppEvaluator
    from maxcode.tasks.builtin import materialize_builtin_cpp

    [task] = materialize_builtin_cpp(tmp_path / "suite", n_tests=2, problems=["algo_strlen_loop"])
    evaluator = CppEvaluator(CppEvalConfig(repeats=1, workers=1), tmp_path / "cache")
    critic = OfflineCritic()
    reference = evaluator.evaluate(task, task.reference_source)
    assert reference.status is Status.OK
    diagnosis = critic.critique(task, task.reference_source, reference).text.splitlines()[0]
    assert "algorithmic" in diagnosis and "strlen" in diagnosis
    [proposal] = OfflineCppPolicy().propose(observe(task), 1, random.Random(0))
    assert proposal.meta["applied"] == ["hoist_invariant_calls"]
    result = evaluator.evaluate(task, proposal.source)
    assert result.status is Status.OK and result.speedup is not None


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("io_prefix_sums_endl", {"fast_io", "endl_to_newline"}),
        ("mem_column_sum", {"loop_interchange"}),
        ("const_pass_by_value", {"const_ref_params"}),
    ],
)
def test_offline_critic_diagnosis_steers_the_policy(problem, expected):
    """The critic's words for a bottleneck are the ones the policy listens for."""
    from maxcode.critique.offline import OfflineCritic

    source = load_builtin_problem(problem).slow_source
    task = task_of(source)
    reference = attempt(source, applied=[], speedup=1.0)
    reference.critique = OfflineCritic().critique(task, source, reference.result)
    policy = OfflineCppPolicy(max_per_proposal=1, preferred_weight=1000.0)
    for seed in range(5):
        [p] = policy.propose(observe(task, [reference], reference), 1, random.Random(seed))
        assert set(p.meta["applied"]) <= expected, (p.meta, reference.critique.text)


def test_strlen_is_hoisted_only_from_the_loop_condition():
    guarded = (
        "#include <cstring>\nint main(int argc, char** argv) { const char* p = argc > 5 ? argv[1] : nullptr;\n"
        "  long n = 0;\n  for (int i = 0; i < argc; i++) { if (p) n += strlen(p); }\n  return n; }\n"
    )
    assert ct.hoist_invariant_calls(guarded) is None
