"""What a seed's docstring says of its sizes: read from its inputs (captured with dynamic shapes, nothing
specialised) or baked in as Inductor compiled them. ``evo.runs.other_sizes`` reads it: a seed that says
SIZE_GENERIC is not presumed baked at the sizes it was captured at; the check at other sizes still judges it."""

SIZE_GENERIC = "Captured with dynamic shapes: the sizes Inductor did not specialise are read from the inputs."
SIZES_BAKED = "Sizes are baked in, as Inductor compiled them."


def sizes_note(captured: dict) -> str:
    """The docstring's sentence on the seed's sizes: SIZE_GENERIC only where Dynamo kept no size a literal."""
    if not captured.get("dynamic"):
        return SIZES_BAKED
    if captured.get("specialised"):
        return (f"Captured with dynamic shapes, but Dynamo specialised {', '.join(captured['specialised'][:6])}: "
                + SIZES_BAKED)
    return SIZE_GENERIC


def size_generic(source: str) -> bool:
    """Whether a seed's docstring says it reads its sizes from its inputs (``sizes_note``)."""
    return SIZE_GENERIC in source
