# Names each failed test in a tier's log with where it panicked and the first lines of
# why, for the summary `make test` ends with (CI keeps only the end of a long log).
# Reads cargo test's output: "thread 'NAME' (TID) panicked at FILE:LINE:COL:" then the
# message (newer Rust prints the thread id, older ones do not).
/^thread '.*' (\([0-9]+\) )?panicked at / {
    name = $0; sub(/^thread '/, "", name); sub(/' (\([0-9]+\) )?panicked at .*/, "", name)
    at = $0; sub(/.* panicked at /, "", at); sub(/:$/, "", at)
    seen[name] = 1
    if (n < 10) { n++; printf "  failed: %s at %s\n", name, at; left = 3 }
    next
}
left > 0 && (/^note: run with/ || /^stack backtrace:/ || /^$/) { left = 0; next }
left > 0 { printf "    %s\n", substr($0, 1, 300); left--; next }
/^test .* \.\.\. FAILED$/ { failed[$2] = 1 }
# A failed test without a panic line of its own (a crash, a thread named otherwise).
END { for (t in failed) if (!(t in seen)) printf "  failed: %s (no panic line in the log)\n", t }
