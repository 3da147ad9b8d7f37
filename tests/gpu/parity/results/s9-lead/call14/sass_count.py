import re, sys, collections
# counts SASS opcodes of the loop (backward branch) that holds the most HMMA in the given cuobjdump -sass text
lines = open(sys.argv[1]).read().splitlines()
ins = []
for l in lines:
    m = re.match(r'\s+/\*([0-9a-f]{4,})\*/\s+(.*?);', l)
    if m:
        addr = int(m.group(1), 16); txt = m.group(2).strip()
        txt = re.sub(r'^@!?U?P\w+\s+', '', txt)
        op = txt.split()[0] if txt else ''
        ins.append((addr, op, txt))
print("function instructions:", len(ins), "HMMA:", sum(1 for a, o, t in ins if o.startswith('HMMA')))
best = None
for i, (a, o, t) in enumerate(ins):
    if o.startswith('BRA'):
        m = re.search(r'0x([0-9a-f]+)', t)
        if not m: continue
        tgt = int(m.group(1), 16)
        if tgt < a:
            body = [x for x in ins if tgt <= x[0] <= a]
            h = sum(1 for x in body if x[1].startswith('HMMA'))
            if best is None or h > best[0] or (h == best[0] and len(body) < len(best[1])):
                best = (h, body, tgt, a)
if best:
    h, body, tgt, a = best
    print("loop 0x%x..0x%x: %d instructions, %d HMMA" % (tgt, a, len(body), h))
    c = collections.Counter(x[1].split('.')[0] for x in body)
    for op, n in c.most_common(40): print("  %-10s %d" % (op, n))
