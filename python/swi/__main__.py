"""python3 -m swi COMMAND ...: the package's commands (convert, card)."""

import sys

USAGE = """usage: python3 -m swi convert nnunet MODEL_DIR --output OUT_DIR [--folds 0,1,...|all]
                                   [--checkpoint checkpoint_final.pth]
       python3 -m swi card --check FILE...

Commands:
  convert nnunet   a trained nnU-Net v2 model folder -> a swi model directory
                   (python3 -m swi convert nnunet --help for its options)
  card --check     check model cards against the package's JSON Schema (docs/card.md)
"""


def main(argv=None, prog: str = "python3 -m swi") -> int:
    """Runs COMMAND; prog is how the usage lines name the command."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] == "card":
        from ._card import main as card_main

        return card_main(argv[1:], prog=prog + " card")
    if argv[0] != "convert":
        print(f"swi: unknown command {argv[0]!r}\n" + USAGE, end="", file=sys.stderr)
        return 2
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if len(argv) >= 2 else sys.stderr)
        return 0 if len(argv) >= 2 else 2
    if argv[1] != "nnunet":
        print(f"swi convert: unknown source {argv[1]!r} (known: nnunet)", file=sys.stderr)
        return 2
    from ._nnunet_convert import main as convert_nnunet

    return convert_nnunet(argv[2:], prog=prog + " convert nnunet")


if __name__ == "__main__":
    sys.exit(main())
