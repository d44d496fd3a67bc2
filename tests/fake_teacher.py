"""The fake USI teacher of the `dlzero teach` tests, as a script to run: a real subprocess speaking USI whose every
label is known in advance (tests/test_teacher.py says what it answers). conftest's `engine` fixture is its teacher
spec; a test that needs it slowed or broken writes the script itself."""

from __future__ import annotations

import textwrap

FAKE_ENGINE = textwrap.dedent('''
    import sys
    import cshogi

    options = {"MultiPV": "1", "Eval": "100", "ResignPly": "1000", "Cut": "0", "Best": "0"}
    board = cshogi.Board()
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        if words[0] == "usi":
            print("id name fake-teacher")
            for name, value in options.items():
                print(f"option name {name} type spin default {value} min 0 max 100000")
            print("usiok", flush=True)
        elif words[0] == "setoption":
            options[words[2]] = words[4]
        elif words[0] == "isready":
            print("readyok", flush=True)
        elif words[0] == "position":
            board = cshogi.Board()
            rest = words[1:]
            if rest[0] == "sfen":
                board.set_sfen(" ".join(rest[1:5]))
                rest = rest[5:]
            else:
                rest = rest[1:]
            for usi in rest[1:]:
                board.push_usi(usi)
        elif words[0] == "go":
            if board.move_number > int(options["ResignPly"]):
                print("info depth 1 score cp -2000 pv resign")
                print("bestmove resign", flush=True)
                continue
            moves = sorted(cshogi.move_to_usi(m) for m in board.legal_moves)
            n, cp = int(options["MultiPV"]), int(options["Eval"])
            index = [f" multipv {i + 1}" if n > 1 else "" for i in range(max(n, 1))]
            for depth in (1, 2):
                for i, usi in enumerate(moves[::-1][:n]):
                    print(f"info depth {depth} seldepth {depth}{index[i]} score cp {cp + 300 - 50 * i} pv {usi}")
            for i, usi in enumerate(moves[:n]):
                print(f"info depth 3 seldepth 5{index[i]} score cp {cp - 50 * i} nodes 900 pv {usi}")
            print(f"info depth 4{index[0]} score cp {cp + 900} lowerbound pv {moves[-1]}")
            print(f"info depth 4{index[0]} score cp {cp - 900} upperbound pv {moves[len(moves) // 2]}")
            for i, usi in enumerate(([moves[1], moves[0]] + moves[2:])[: int(options["Cut"])]):
                print(f"info depth 4{index[i]} score cp {cp + 20 - 200 * i} pv {usi}")
            print(f"bestmove {moves[int(options['Best'])]}", flush=True)
        elif words[0] == "quit":
            break
''')
