"""A failure names the line of the candidate's source where it happened, not only the launch line: under Triton's
interpreter (the error's cause holds the kernel's own frame) and for Triton compile errors on a GPU (whose line
counts from the kernel's `def`)."""
import ast

from triton.compiler.errors import CompilationError

from conftest import candidate, make_evaluator
from fitness.judge.candidate import describe_exception

GOOD = candidate("good")
BROKEN_LINE = "x = tl.load(x_ptr + offs, mask=mask) + undefined_thing"


def test_an_error_in_a_kernel_body_names_its_line_on_the_interpreter(sandbox):
    with make_evaluator(trials=1, sandbox=sandbox) as ev:
        result = ev.evaluate(GOOD.replace("x = tl.load(x_ptr + offs, mask=mask)", BROKEN_LINE))
    assert result.status == "compile_error"
    assert f"failing line 15, in scale_shift_kernel: {BROKEN_LINE}" in result.reason
    assert "  line 28, in forward: scale_shift_kernel[" in result.reason  # the launch, as context


def test_a_triton_compile_error_is_mapped_from_its_kernel_line_to_the_file_line(tmp_path):
    path = tmp_path / "candidate.py"
    path.write_text(GOOD)
    kernel_src = GOOD[GOOD.index("def scale_shift_kernel"):GOOD.index("\n\n\nclass ModelNew")]
    node = ast.parse(kernel_src).body[0].body[2]  # `x = tl.load(...)`: line 4 of the kernel, line 15 of the file

    def compile_kernel():
        try:
            raise CompilationError(kernel_src, node, "an error in the kernel body")
        except CompilationError as inner:  # Triton re-raises at each call site, the inner error as the cause
            raise CompilationError(kernel_src, ast.parse(kernel_src).body[0].body[0], None) from inner

    try:
        compile_kernel()
    except CompilationError as exc:
        text = describe_exception(exc, str(path))
    assert text.startswith("CompilationError: at 2:4:")  # the outer error, as Triton words it
    assert ("failing line 15 (line 4 of kernel scale_shift_kernel), in scale_shift_kernel: "
            "x = tl.load(x_ptr + offs, mask=mask)") in text
