"""The campaign measurement's scripted replies (experiments/llm_campaign.py): the kernel a coder or debugger was shown
comes back with one distinct line, after the scripted latency, and every request is told apart by its digest."""
from experiments.llm_campaign import Script, request_digest, shown_kernel

KERNEL = "import torch\n\nX = 1\n\nclass ModelNew:\n    pass"
CODER = ("Implement the plan below on the parent kernel.\n\n## Parent kernel 1.0 (numbered)\n```\n"
         + "\n".join(f"{i + 1:>4}| {line}".rstrip() for i, line in enumerate(KERNEL.split("\n")))
         + "\n```\nLine numbers in the plan are those of this listing.\n\n## PyTorch reference\n```python\nref\n```\n")
DEBUGGER = f"## Error\nboom\n\n## Failing kernel\n```python\n{KERNEL}\n```\n\n## PyTorch reference\n```python\nref\n```"


def body(role: str, prompt: str, seed: int = 0) -> dict:
    return {"model": "scripted-model", "seed": seed,
            "messages": [{"role": "system", "content": f"You are ... Your role: {role}."},
                         {"role": "user", "content": prompt}]}


def test_the_kernel_shown_is_read_back_without_its_line_numbers():
    assert shown_kernel(CODER) == KERNEL + "\n"
    assert shown_kernel(DEBUGGER) == KERNEL + "\n"


def test_replies_wait_the_latency_and_each_code_is_a_kernel_of_its_own():
    script = Script(latency_s=20.0)
    plan, first, second = script(body("planner", "plan")), script(body("coder", CODER)), script(body("coder", CODER))
    assert all(reply["delay_s"] == 20.0 for reply in (plan, first, second))
    assert plan["content"].startswith("## Plan") and "not a model's" in plan["content"]
    assert KERNEL in first["content"] and first["content"] != second["content"]
    assert script.roles == ["planner", "coder", "coder"]
    assert len(set(script.digests)) == 2  # the two coder requests were the same request: the digest says so
    assert request_digest(body("coder", CODER, seed=1)) != request_digest(body("coder", CODER, seed=2))
