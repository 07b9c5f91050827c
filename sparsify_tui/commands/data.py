"""CLI: ``sparsify-tui data images`` (a sample set from an image folder) and ``sparsify-tui data show`` (what a
sample set holds, and whether it fits a project). The core is :mod:`sparsify_tui.analysis.sample_sets`."""

from __future__ import annotations

import sys


def register(sub) -> None:
    p = sub.add_parser("data", help="build and inspect sample sets (.npz) from image folders",
                       description="Build the sample set (.npz) every measuring command takes (--data) from a folder "
                                   "of images, and show what a sample set holds.")
    p.set_defaults(handler=lambda args: (p.print_help(), 2)[1])
    kinds = p.add_subparsers(dest="data_kind", metavar="KIND")

    i = kinds.add_parser(
        "images", help="preprocess an image folder into a labelled .npz",
        description="Read every image of DIR with Pillow, preprocess it (resize or crop, scale, mean/std, channel "
                    "order, layout) and write one .npz: the items under the model's input name, the labels under "
                    "'labels' and the class names under 'class_names'. Class subfolders (as ImageNet and "
                    "torchvision's ImageFolder lay them out) give the labels, or a CSV of file,label rows. Items are "
                    "shuffled (--seed) so the first ones, which calibrate, are not all one class. With --project the "
                    "model's input gives the name, size, layout, channels and dtype.")
    i.add_argument("folder", metavar="DIR", help="the folder of images (class subfolders, or images and a CSV)")
    i.add_argument("-o", "--output", required=True, metavar="SET.npz", help="the sample set to write")
    i.add_argument("--project", metavar="P", default=None,
                   help="fill the input name, size, layout, channels and dtype from this project's model")
    i.add_argument("--size", metavar="H,W", default=None,
                   help="item height and width in pixels (default: the project's input, else the images' own size)")
    i.add_argument("--resize-shorter", type=int, metavar="N", default=None,
                   help="resize the shorter side to N pixels keeping the ratio (then --center-crop)")
    i.add_argument("--center-crop", action="store_true", help="crop H,W from the middle (after --resize-shorter)")
    i.add_argument("--pad", action="store_true",
                   help="text lines: height H, width by the ratio up to W, padded right with zeros (PaddleOCR's "
                        "recognizer rule)")
    i.add_argument("--mean", metavar="M[,M,M]", default=None,
                   help="subtracted per channel after --scale, e.g. 0.485,0.456,0.406 (stored channel order)")
    i.add_argument("--std", metavar="S[,S,S]", default=None, help="divided per channel after --mean, e.g. 0.229,0.224,0.225")
    i.add_argument("--scale", metavar="F", default=None, help="pixel values 0..255 are multiplied by F first (default 1/255)")
    i.add_argument("--layout", choices=("nchw", "nhwc"), default=None, help="item layout (default nchw, or the project's)")
    i.add_argument("--bgr", action="store_true", help="store the channels in BGR order (OpenCV-trained models)")
    i.add_argument("--gray", action="store_true", help="one grayscale channel (default 3, or the project's)")
    i.add_argument("--labels", metavar="folders|none|FILE.csv", default=None,
                   help="where labels come from: class subfolders, none, or a CSV of file,label rows (default: "
                        "folders when the images are in subfolders)")
    i.add_argument("--text-labels", action="store_true",
                   help="the CSV's labels are texts (a text recognizer's): stored as code points, int32 padded with -1")
    i.add_argument("--input-name", metavar="NAME", default=None,
                   help="the array name of the items (default: the project's input name, else 'input')")
    i.add_argument("--limit", type=int, metavar="N", default=None, help="keep N items (after shuffling)")
    i.add_argument("--seed", type=int, metavar="S", default=0, help="shuffle seed (default 0)")
    i.add_argument("--json", action="store_true", help="print the result as JSON")
    i.set_defaults(handler=cmd_images)

    s = kinds.add_parser(
        "show", help="arrays, shapes, value ranges, labels and class names of a sample set",
        description="Print what a sample set (.npz or .npy) holds: each array's shape, dtype and value range, the "
                    "label histogram and class names, and with --project whether it fits that project's model "
                    "(the check every measuring job runs first).")
    s.add_argument("path", metavar="SET.npz", help="the sample set")
    s.add_argument("--project", metavar="P", default=None, help="check that it fits this project's model inputs")
    s.add_argument("--labels", metavar="KEY", default=None, help="key of the labels array (default labels)")
    s.add_argument("--metric", metavar="M", default=None,
                   help="the metric it will be scored with (FILE.py:FUNCTION accepts any labels)")
    s.add_argument("--json", action="store_true", help="print the summary as JSON")
    s.set_defaults(handler=cmd_show)


def _project(ref: str):
    """``(model path, setup dims)`` of project ``ref``."""
    from sparsify_tui.store import Workspace

    ws = Workspace()
    project = ws.get_project(ref)
    return ws.model_path(project["id"]), dict((project.get("setup") or {}).get("dims") or {})


def cmd_images(args) -> int:
    from sparsify_tui import settings
    from sparsify_tui.analysis import sample_sets as ss
    from sparsify_tui.commands.output import print_json, stderr_progress
    from sparsify_tui.errors import SampleDataError

    size = ss.parse_size(args.size)
    recipe = ss.ImageRecipe(size=size, resize_shorter=args.resize_shorter, center_crop=args.center_crop,
                            pad=args.pad, mean=ss.parse_floats(args.mean, "--mean"),
                            std=ss.parse_floats(args.std, "--std"), scale=ss.parse_scale(args.scale),
                            layout=args.layout or "nchw", bgr=args.bgr, channels=1 if args.gray else 3)
    name = args.input_name or ss.DEFAULT_INPUT_NAME
    if args.project:
        model, dims = _project(args.project)
        want = ss.model_image_input(model, dims)
        conflicts = [f"{flag} {mine} (the model's input '{want.name}' takes {theirs})" for flag, mine, theirs in (
            ("--size", size and f"{size[0]},{size[1]}", want.size and f"{want.size[0]},{want.size[1]}"),
            ("--layout", args.layout, want.layout), ("--gray", args.gray and "1 channel", f"{want.channels} channel(s)"),
            ("--input-name", args.input_name, want.name))
            if mine and theirs and mine != theirs and not (flag == "--gray" and want.channels == 1)]
        if conflicts:
            raise SampleDataError(f"{conflicts[0]}: drop it, --project fills it from the model")
        if want.size is None and size is None:
            raise SampleDataError(f"project {args.project!r}'s input '{want.name}' has a symbolic height or width: "
                                  "give --size H,W")
        recipe.size, recipe.layout, recipe.channels, recipe.dtype = size or want.size, want.layout, want.channels, \
            want.dtype
        if recipe.integer and args.scale is None:
            recipe.scale = 1.0 / 255.0
        name = want.name
    out = settings.output_path(args.output, "-o")
    built = ss.build_image_set(args.folder, out, recipe, input_name=name, labels=args.labels,
                               text_labels=args.text_labels, limit=args.limit, seed=args.seed,
                               progress=stderr_progress(args.json))
    if args.json:
        print_json(built.to_dict())
    else:
        print(built.summary_line())
        print(f"  preprocessing: {built.recipe}", file=sys.stderr)
    return 0


def cmd_show(args) -> int:
    from sparsify_tui.analysis import sample_sets as ss
    from sparsify_tui.commands.output import print_json

    summary = ss.summarize(args.path)
    fits = None
    if args.project:
        from sparsify_tui import settings

        model, dims = _project(args.project)
        problem = ss.fit_problem(args.path, model, dims=dims, labels_key=args.labels,
                                 metric=settings.metric(args.metric))
        fits = {"project": args.project, "fits": problem is None, "problem": problem}
    if args.json:
        print_json({**summary.to_dict(), **({"fits": fits} if fits else {})})
        return 0
    print(summary.line())
    print(f"  file: {summary.path} ({summary.size_bytes / 1e6:.1f} MB)")
    for a in summary.arrays:
        rng = f"  [{a.min:.4g}, {a.max:.4g}]" if a.min is not None else ""
        bad = f"  {a.nonfinite} NaN/Inf" if a.nonfinite else ""
        print(f"  array {a.name}: {a.dtype} {a.shape}{rng}{bad}")
    if not summary.ranges_read:
        print(f"  value ranges not read: the file is over {ss.RANGE_BYTES >> 20} MB")
    if summary.label_kind == "classes":
        print("  label histogram (class: items):")
        for c, n in sorted(summary.histogram.items()):
            print(f"    {c:>5} {summary.class_name(c)[:40]:<40} {n}")
    elif summary.labels is not None:
        print(f"  labels: {summary.label_text()}")
    if summary.class_names:
        names = ", ".join(summary.class_names[:20]) + (", ..." if len(summary.class_names) > 20 else "")
        print(f"  class names ({len(summary.class_names)}): {names}")
    if fits is not None:
        print(f"  fits project {args.project}: " + ("yes" if fits["fits"] else f"no: {fits['problem']}"))
    return 0 if fits is None or fits["fits"] else 2
