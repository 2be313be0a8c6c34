/* Preloaded into the sanitized test processes (scripts/sanitize.sh): dlclose does nothing, so the
 * Open MPI components loaded with dlopen stay mapped until exit. LeakSanitizer reports at exit,
 * after MPI_Finalize has closed them, and frames in an unmapped library print as
 * "<unknown module>": no suppression could name them, and every MPI test would fail on Open MPI's
 * own component allocations. With them mapped, tests/sanitizers/lsan.supp names their libraries. */
int dlclose(void* handle)
{
    (void)handle;
    return 0;
}
