"""The tools around the compiler: the `aesgen` command line (cli), what it prints (report),
exploring depth and width (explore, explore_gfdouble), tuning for this CPU (tune), the drop-in
export folder (export) and `make demo` (demo). The compiler stages (aesgen.*) never import them."""
