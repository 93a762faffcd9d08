"""The per-family table of experiments/heavy_ops.py's JSON: each convolution's fraction of cuDNN's speed, and the
geometric mean per family (depthwise, standard, transposed), as README.md quotes it.

    python3 experiments/results/heavy_ops_conv/table.py experiments/results/heavy_ops_conv/conv_h100_b01c2a4.json
"""
import json
import math
import sys


def family(row: dict) -> str:
    name = row["problem"]
    return "depthwise" if "depthwise" in name and "separable" not in name else \
        "transposed" if "transposed" in name else "standard"


def main(path: str) -> None:
    rows = [r for r in json.load(open(path)) if "fraction_of_library" in r]
    print("| problem | path | cuDNN ms | kernelevo ms | fraction of cuDNN | kernelevo TFLOP/s | cuDNN TFLOP/s | "
          "kernelevo GB/s | cuDNN GB/s | tile |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['problem'].split('/')[1][:48]} | {r['path']} | {r['library_ms']:.3f} | {r['kernelevo_ms']:.3f} | "
              f"{r['fraction_of_library']:.2f}x | {r['kernelevo_tflops']:.1f} | {r['library_tflops']:.1f} | "
              f"{r['kernelevo_gbs']:.0f} | {r['library_gbs']:.0f} | {r['best_tile']} |")
    print("\n| family | problems | geometric mean of the fraction | worst | best |")
    print("|---|---|---|---|---|")
    for name in ("depthwise", "standard", "transposed"):
        got = [r["fraction_of_library"] for r in rows if family(r) == name]
        if got:
            mean = math.exp(sum(map(math.log, got)) / len(got))
            print(f"| {name} | {len(got)} | {mean:.2f}x | {min(got):.2f}x | {max(got):.2f}x |")
    failed = [r for r in json.load(open(path)) if "fraction_of_library" not in r]
    for r in failed:
        print(f"\nnot timed: {r['problem']}: {r.get('error')}")


if __name__ == "__main__":
    main(sys.argv[1])
