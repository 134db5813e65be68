#!/usr/bin/env python3
"""The sampler's link order: which .text sections a callgrind run executed.

usage: order_file.py MAP CALLGRIND_OUT ORDER_FILE

MAP is the release link's map (lld -Map: every input section with its address and size);
CALLGRIND_OUT was written with --dump-instr=yes --compress-pos=no --compress-strings=no, so
each cost line starts with the absolute address of an executed instruction. Every section
holding one is written to ORDER_FILE as its symbol name (the section name after .text. or
.text.unlikely.), sorted by name so a regenerated file diffs by what changed, in the form
lld's --symbol-ordering-file reads. (Within the set the order hardly matters: all of it is
resident in a sampler.)
"""
import bisect
import re
import sys

SECTION = re.compile(r'^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+\d+\s+\S.*:\((\.text\.[^)]*)\)$')
PREFIXES = ('.text.unlikely.', '.text.hot.', '.text.startup.', '.text.exit.', '.text.')


def sections(map_lines):
    """(start, size, section name) of every named .text input section, by address."""
    out = []
    for line in map_lines:
        m = SECTION.match(line)
        if m:
            out.append((int(m.group(1), 16), int(m.group(2), 16), m.group(3)))
    return sorted(out)


def executed(secs, cg_lines):
    """Section name -> instructions executed in it."""
    starts = [s[0] for s in secs]
    counts = {}
    for line in cg_lines:
        if not line.startswith('0x'):
            continue
        fields = line.split()
        addr = int(fields[0], 16)
        i = bisect.bisect_right(starts, addr) - 1
        if i >= 0 and addr < secs[i][0] + secs[i][1]:
            name = secs[i][2]
            counts[name] = counts.get(name, 0) + (int(fields[-1]) if len(fields) > 1 else 0)
    return counts


def symbol(section):
    return next(section[len(p):] for p in PREFIXES if section.startswith(p))


def main(argv):
    if len(argv) != 4:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    with open(argv[1]) as f:
        secs = sections(f)
    if not secs:
        print(f'order_file: no .text sections in {argv[1]} (not an lld map?)', file=sys.stderr)
        return 1
    with open(argv[2]) as f:
        counts = executed(secs, f)
    if not counts:
        print(f'order_file: {argv[2]} executed nothing in the map (another binary?)', file=sys.stderr)
        return 1
    size = {s[2]: s[1] for s in secs}
    names = sorted(counts)
    with open(argv[3], 'w') as f:
        f.writelines(sorted(symbol(n) + '\n' for n in names))
    print(f'{len(names)} of {len(secs)} text sections executed, '
          f'{sum(size[n] for n in names) / 1024:.0f} KiB of '
          f'{sum(s[1] for s in secs) / 1024:.0f} KiB -> {argv[3]}')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
