# halo_infer_flags BIN: the halo-infer flags that the scripts pass to every run and that BIN knows
# (a baseline build of an older main may not): --random-features (a dataset without features runs
# on seeded random ones instead of being refused), --report (the tables the scripts grep; off by
# default where standard output is not a terminal), --overwrite (a reused --out). One per line;
# use as: mapfile -t flags < <(halo_infer_flags "$bin/halo-infer").
halo_infer_flags() {
  local help flag
  help=$("$1" --help 2>/dev/null) || true
  for flag in --random-features --report --overwrite; do
    grep -q -- "$flag" <<<"$help" && printf '%s\n' "$flag"
  done
  return 0
}
