#!/usr/bin/env python3
"""Event simulation of DeepSpeed's pipeline schedule against 1F1B.

DeepSpeed's `TrainSchedule` (deepspeed/runtime/pipe/schedule.py) runs 2(m + p - 1)
steps per batch; even stages run forwards on even steps, odd stages on odd steps, and
every send and receive is blocking (p2p.py) and paired with the neighbouring stage.
This replays that instruction stream, stage by stage, with a forward of `F`, a backward
of `B` and a transfer of `T` time units, and prints its makespan beside the 1F1B time
(m + p - 1)(F + B) the planner charges (Narayanan et al. 2021, §2.2.1).

Used by docs/methodology.md (MT-NLG): with free sends the two are equal, so the
schedule's lock-step is not what slows MT-NLG down.

    python3 scripts/analysis/deepspeed_train_schedule.py MICROBATCHES STAGES F B [T]
"""
import sys


def train_schedule(m, p, s):
    """Stage s's instructions, in the order TrainSchedule.steps() yields them."""
    valid = lambda mb: 0 <= mb < m
    ops, prev = [], -1
    for k in range(2 * (m + p - 1)):
        if k % 2 == s % 2:  # forward step (_even_step_forward_id / _odd_step_forward_id)
            mb, fwd = (k - s % 2) // 2 - s // 2, True
        elif k % 2 == 0:  # even step, odd stage: _even_step_backward_id
            mb, fwd = k // 2 - p + (s + 1) // 2, False
        else:  # odd step, even stage: _odd_step_backward_id
            mb, fwd = (k - 1) // 2 - p + 1 + s // 2, False
        if fwd and s > 0:
            if valid(mb):
                ops.append(("recv", ("act", mb, s - 1)))
            if valid(prev):
                ops.append(("send", ("grad", prev, s)))
        if not fwd and s < p - 1:
            if valid(prev):
                ops.append(("send", ("act", prev, s)))
            if valid(mb):
                ops.append(("recv", ("grad", mb, s + 1)))
        if valid(mb):
            ops.append(("F" if fwd else "B", None))
        prev = mb
    return ops


def makespan(m, p, f, b, t):
    programs = [train_schedule(m, p, s) for s in range(p)]
    pc, clock, waiting = [0] * p, [0.0] * p, {}
    moved = True
    while moved:
        moved = False
        for s in range(p):
            while pc[s] < len(programs[s]):
                kind, key = programs[s][pc[s]]
                if kind in ("F", "B"):
                    clock[s] += f if kind == "F" else b
                elif key in waiting and waiting[key][0] != s:
                    peer, ready = waiting.pop(key)  # blocking pair: both leave together
                    clock[s] = clock[peer] = max(ready, clock[s]) + t
                    pc[peer] += 1
                else:
                    waiting.setdefault(key, (s, clock[s]))
                    break
                pc[s] += 1
                moved = True
    assert all(pc[s] == len(programs[s]) for s in range(p)), "schedule deadlocked"
    return max(clock)


if __name__ == "__main__":
    m, p = int(sys.argv[1]), int(sys.argv[2])
    f, b = float(sys.argv[3]), float(sys.argv[4])
    t = float(sys.argv[5]) if len(sys.argv) > 5 else 0.0
    deepspeed, one_f_one_b = makespan(m, p, f, b, t), (m + p - 1) * (f + b)
    print(f"TrainSchedule {deepspeed:.2f}, 1F1B {one_f_one_b:.2f}, ratio {deepspeed / one_f_one_b:.4f}")
