# The sources of `swi export` (swi_cmd_export), relative to export/: shared by
# export/CMakeLists.txt and the fuzz target fuzz_onnx_export (fuzz/CMakeLists.txt).
set(SWI_EXPORT_SOURCES
  export.c          # the command, step by step
  export_args.c     # options (getopt_long), --help
  export_inspect.c  # what the network is, and whether it can be exported
  export_layout.c   # the window layout, from libswi's public layout functions
  export_graph.c    # the pipeline graph: sizes, padding, crop, normalise, argmax, model
  export_windows.c  # the window loops and the inlined network
  export_ops.c)     # small graph helpers
