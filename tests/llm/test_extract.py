import pytest

from maxcode.llm.extract import extract_code

CPP = '#include <cstdio>\nint main() { puts("hi"); }\n'
HELPER = "static int add(int a, int b) { return a + b; }\n"
PY = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.mark.parametrize("tag", ["cpp", "c++", "C++", "cc", "cxx", "", "c"])
def test_backtick_fence_any_cpp_tag(tag):
    got = extract_code(f"Here:\n```{tag}\n{CPP}```\nDone.", "cpp")
    assert got.source == CPP


def test_tilde_and_long_fences():
    assert extract_code(f"~~~cpp\n{CPP}~~~", "cpp").source == CPP
    nested = f"````cpp\n{CPP}// a ``` inside\n````"
    assert "a ``` inside" in extract_code(nested, "cpp").source


@pytest.mark.parametrize("tag", ["python", "py", "cuda", ""])
def test_cuda_task_takes_python_block_with_model_new(tag):
    assert extract_code(f"```{tag}\n{PY}```", "cuda").source == PY


def test_several_blocks_choose_the_whole_program():
    text = f"```cpp\n{CPP}```\nthen a helper:\n```cpp\n{HELPER}```\n"
    assert extract_code(text, "cpp").source == CPP
    two = CPP.replace("hi", "v2")
    assert extract_code(f"```cpp\n{CPP}```\n```cpp\n{two}```", "cpp").source == two


def test_block_in_wrong_language_is_skipped():
    text = f"```bash\ng++ -O2 a.cpp\n```\n```cpp\n{CPP}```\n```bash\n./a.out\n```"
    assert extract_code(text, "cpp").source == CPP
    cuda = f"```python\n{PY}```\n```cpp\n// the kernel only\n__global__ void k() {{}}\n```"
    assert extract_code(cuda, "cuda").source == PY


def test_missing_fence_takes_code_from_first_include():
    text = "Sure, here it is.\n" + CPP
    assert extract_code(text, "cpp").source == CPP
    assert extract_code("Use this:\n" + PY, "cuda").source == PY


def test_truncated_output_is_no_code_with_reason():
    text = "```cpp\n#include <cstdio>\nint main() { for (int i = 0; i <"
    got = extract_code(text, "cpp", truncated=True)
    assert got.source is None
    assert "unterminated fence" in got.reason and "token limit" in got.reason


def test_truncated_but_earlier_complete_block_is_used():
    text = f"```cpp\n{CPP}```\nAn even faster version:\n```cpp\n#include <cstdio>\nint ma"
    assert extract_code(text, "cpp", truncated=True).source == CPP


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty completion"),
        ("I cannot make this faster.", "no code block"),
        (f"```cpp\n{HELPER}```", "none defines main()"),
        ("<think>int main() {}</think>", "empty completion"),
    ],
)
def test_unusable_completions_become_reasons(text, reason):
    got = extract_code(text, "cpp")
    assert got.source is None and reason in got.reason


def test_reasoning_closed_by_a_lone_end_tag_is_ignored():
    """QwQ-style answers: the chat template opened <think> in the prompt."""
    text = f"draft ```cpp\n{CPP}```\nno, better:\n</think>\nfinal:\n```cpp\nint main() {{ return 1; }}\n```"
    assert extract_code(text, "cpp").source == "int main() { return 1; }\n"
    only_in_reasoning = extract_code(f"```cpp\n{CPP}```\n</think>\nDone.", "cpp")
    assert only_in_reasoning.source == CPP
    assert "inside the reasoning" in only_in_reasoning.reason


def test_a_lone_closing_fence_after_unfenced_code():
    """The prompt opened the fence; the answer is code and a closing fence."""
    assert extract_code(f"{CPP}```\n", "cpp").source == CPP


def test_think_tags_are_ignored():
    text = f"<think>maybe ```cpp\nint main() {{ wrong(); }}\n``` no</think>\n```cpp\n{CPP}```"
    assert extract_code(text, "cpp").source == CPP


def test_unknown_language_is_a_clear_error():
    with pytest.raises(ValueError, match="language must be one of"):
        extract_code(CPP, "rust")
