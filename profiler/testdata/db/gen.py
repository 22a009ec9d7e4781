#!/usr/bin/env python3
"""Writes the SQLite test databases with Python's own sqlite3 module.

ascend_pytorch_profiler_0.db models torch_npu's export_type=db output: tables
created as TorchDb.create_table_with_headers does (columns and declared types
from TableColumnsManager, torch_npu/profiler/analysis/prof_common_func/
_constant.py; PYTORCH_API's times are declared TEXT, so SQLite stores them as
text), string ids from 1<<28 (framework APIs) and 2<<28 (memory),
globalTid = pid<<32 | tid, enqueue rows named "Enqueue", dequeue rows
"Dequeue@op", call stacks split at ";\\r\\n" into PYTORCH_CALLCHAINS, and
the input shapes in column inputDtypes, the dtypes in inputShapes (get_fwk_api
lists "Input Dims" before "Input type", the table the other way round).

The bad_*.db files hold one defect each for the error tests.
Run: python3 gen.py (from this directory); the output is committed.
"""
import os
import sqlite3

HERE = os.path.dirname(os.path.abspath(__file__))
INVALID = 4294967295

COLUMNS = {
    "STRING_IDS": [("id", "INTEGER"), ("value", "TEXT")],
    "ENUM_API_TYPE": [("id", "INTEGER"), ("name", "INTEGER")],
    "CONNECTION_IDS": [("id", "INTEGER"), ("connectionId", "INTEGER")],
    "PYTORCH_CALLCHAINS": [("id", "INTEGER"), ("stack", "INTEGER"), ("stackDepth", "INTEGER")],
    "PYTORCH_API": [("startNs", "TEXT"), ("endNs", "TEXT"), ("globalTid", "INTEGER"), ("connectionId", "INTEGER"),
                    ("name", "INTEGER"), ("sequenceNumber", "INTEGER"), ("fwdThreadId", "INTEGER"),
                    ("inputDtypes", "INTEGER"), ("inputShapes", "INTEGER"), ("callchainId", "INTEGER"),
                    ("type", "INTEGER")],
    "MEMORY_RECORD": [("component", "INTEGER"), ("timestamp", "INTEGER"), ("totalAllocated", "INTEGER"),
                      ("totalReserved", "INTEGER"), ("totalActive", "INTEGER"), ("streamPtr", "INTEGER"),
                      ("deviceId", "INTEGER")],
    "OP_MEMORY": [("name", "INTEGER"), ("size", "INTEGER"), ("allocationTime", "INTEGER"), ("releaseTime", "INTEGER"),
                  ("activeReleaseTime", "INTEGER"), ("duration", "INTEGER"), ("activeDuration", "INTEGER"),
                  ("allocationTotalAllocated", "INTEGER"), ("allocationTotalReserved", "INTEGER"),
                  ("allocationTotalActive", "INTEGER"), ("releaseTotalAllocated", "INTEGER"),
                  ("releaseTotalReserved", "INTEGER"), ("releaseTotalActive", "INTEGER"), ("streamPtr", "INTEGER"),
                  ("deviceId", "INTEGER")],
    "STEP_TIME": [("id", "INTEGER"), ("startNs", "INTEGER"), ("endNs", "INTEGER")],
    "GC_RECORD": [("startNs", "INTEGER"), ("endNs", "INTEGER"), ("globalTid", "INTEGER")],
    "META_DATA": [("name", "TEXT"), ("value", "TEXT")],
}


def create(con, table, rows, columns=None):
    cols = columns or COLUMNS[table]
    con.execute("CREATE TABLE IF NOT EXISTS {} ({})".format(table, ", ".join(f"{n} {t}" for n, t in cols)))
    con.executemany("INSERT INTO {} VALUES ({})".format(table, ",".join("?" * len(cols))), rows)


def fresh(name):
    path = os.path.join(HERE, name)
    if os.path.exists(path):
        os.remove(path)
    con = sqlite3.connect(path)
    con.execute("PRAGMA page_size=1024")
    return con


class Strings:
    def __init__(self, start):
        self.ids, self.next = {}, start

    def id(self, s):
        if not s:
            return INVALID
        if s not in self.ids:
            self.ids[s], self.next = self.next, self.next + 1
        return self.ids[s]

    def rows(self):
        return [(v, k) for k, v in self.ids.items()]


def gtid(pid, tid):
    return pid << 32 | tid


T0 = 1700000000000000000  # epoch ns
PID, MAIN, BWD = 4242, 4242, 4250


def pytorch_db():
    con = fresh("ascend_pytorch_profiler_0.db")
    fwk = Strings(1 << 28)
    mem = Strings(2 << 28)
    conns = {}  # id -> [connection ids]
    chains = {}  # id -> [(string id, depth)]

    def conn(ids):
        conns[len(conns)] = ids
        return len(conns) - 1

    def chain(stack):
        cid = len(chains)
        chains[cid] = [(fwk.id(f), i) for i, f in enumerate(stack.split(";\r\n"))]
        return cid

    api = []
    # task queue: enqueue rows first, then dequeue rows (FwkApiDbParser order)
    api.append([T0 + 1_200, T0 + 1_300, gtid(PID, MAIN), conn([7]), fwk.id("Enqueue"), None, None, None, None, None, 50002])
    api.append([T0 + 1_500, T0 + 1_900, gtid(PID, 4243), conn([7]), fwk.id("Dequeue@aten::add"), None, None, None, None, None, 50002])
    api.append([T0 + 1_000, T0 + 1_400, gtid(PID, MAIN), None, fwk.id("<module>"), None, None, None, None, None, 50003])
    api.append([T0, T0 + 10_000, gtid(PID, MAIN), None, fwk.id("ProfilerStep#1"), -1, 0, None, None, None, 50001])
    api.append([T0 + 1_000, T0 + 2_000, gtid(PID, MAIN), conn([3, 8]), fwk.id("aten::add"), 17, 0,
                fwk.id("[[2, 3], [2, 3], []]"), fwk.id("float;float;Scalar"),
                chain("train.py(10): step;\r\nmodel.py(5): forward"), 50001])
    api.append([T0 + 3_000, T0 + 4_500, gtid(PID, BWD), conn([8]), fwk.id("AddBackward0"), 17, MAIN, None, None, None, 50001])
    api.append([T0 + 5_000, T0 + 5_000, gtid(PID, MAIN), None, fwk.id("mstx_mark_op"), None, 0, None, None, None, 50004])
    api.append([T0 + 11_000, T0 + 20_000, gtid(PID, MAIN), None, fwk.id("ProfilerStep#2"), -1, 0, None, None, None, 50001])
    api.append([T0 + 12_000, T0 + 12_500, gtid(PID, MAIN), None, fwk.id("aten::empty"), 18, 0, None, None, None, 50001])
    api.append([None, T0 + 13_000, gtid(PID, MAIN), None, fwk.id("aten::lost"), 19, 0, None, None, None, 50001])
    create(con, "PYTORCH_API", api)
    create(con, "CONNECTION_IDS", [(i, c) for i, cs in conns.items() for c in cs])
    create(con, "PYTORCH_CALLCHAINS", [(i, s, d) for i, fs in chains.items() for s, d in fs])
    create(con, "ENUM_API_TYPE", [(50001, "op"), (50002, "queue"), (50003, "python_trace"), (50004, "mstx")])

    MiB = 1 << 20
    pta, ws = mem.id("PTA"), mem.id("WORKSPACE")
    create(con, "MEMORY_RECORD", [
        (pta, T0 + 1_100, 2 * MiB, 20 * MiB, 2 * MiB, 94000000000, 0),
        (ws, T0 + 1_150, 512, 4 * MiB, 512, 94000000000, 0),
        (pta, T0 + 3_100, 1 * MiB, 20 * MiB, 3 * MiB, 94000000000, 0),
        (pta, T0 + 12_100, 5 * MiB, 22 * MiB, None, None, 1),  # NULL active / stream
    ])
    create(con, "OP_MEMORY", [
        (mem.id("aten::add"), 2 * MiB, T0 + 1_100, T0 + 3_100, T0 + 3_000, 2_000, 1_900,
         2 * MiB, 20 * MiB, 2 * MiB, 1 * MiB, 20 * MiB, 3 * MiB, 94000000000, 0),
        (mem.id("aten::empty"), 4 * MiB, T0 + 12_100, None, None, None, None,
         5 * MiB, 22 * MiB, None, None, None, None, None, 1),
    ])
    create(con, "STEP_TIME", [(1, T0, T0 + 10_000), (2, T0 + 11_000, T0 + 20_000)])
    create(con, "GC_RECORD", [(T0 + 6_000, T0 + 6_800, gtid(PID, MAIN))])
    create(con, "META_DATA", [("torch_npu_version", "2.5.1"), ("cann_version", "8.0.0")])
    create(con, "STRING_IDS", fwk.rows() + mem.rows())
    con.commit()
    con.close()


def bad_dbs():
    # a time that is not a number
    con = fresh("bad_types.db")
    s = Strings(1 << 28)
    create(con, "PYTORCH_API", [[T0, T0 + 5, gtid(PID, MAIN), None, s.id("aten::ok"), 1, 0, None, None, None, 50001],
                                ["12:00:01", T0 + 9, gtid(PID, MAIN), None, s.id("aten::bad"), 2, 0, None, None, None, 50001]])
    create(con, "STRING_IDS", s.rows())
    con.commit()
    con.close()
    # NULLs, reals and texts in every other column: all tolerated
    con = fresh("bad_nulls.db")
    s = Strings(1 << 28)
    create(con, "PYTORCH_API", [[str(T0), "%d.0" % (T0 + 1024), None, None, None, None, None, None, None, None, None],
                                [T0 + 2048, "  %d " % (T0 + 4096), "x", 3.5, 999, "7", None, 12345, None, None, "50001"]])
    create(con, "MEMORY_RECORD", [(None, T0, 1.0, "2", None, None, None), (s.id("PTA"), None, 1, 2, 3, 4, 0)])
    create(con, "STRING_IDS", s.rows() + [(None, "no id"), (77, None)])
    con.commit()
    con.close()
    # no profiler tables at all
    con = fresh("bad_notables.db")
    create(con, "META_DATA", [("torch_npu_version", "2.5.1")])
    con.commit()
    con.close()
    # names but no STRING_IDS
    con = fresh("bad_nostrings.db")
    create(con, "PYTORCH_API", [[T0, T0 + 5, gtid(PID, MAIN), None, 268435456, 1, 0, None, None, None, 50001]])
    con.commit()
    con.close()
    # PYTORCH_API without its startNs column
    con = fresh("bad_nocolumn.db")
    create(con, "PYTORCH_API", [[T0 + 5, 1]], [("endNs", "TEXT"), ("name", "INTEGER")])
    create(con, "STRING_IDS", [(1, "x")])
    con.commit()
    con.close()
    # an endless view where PYTORCH_API should be: views are not read
    con = fresh("bad_view.db")
    con.execute("CREATE VIEW PYTORCH_API AS WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
                "SELECT x AS startNs, x AS endNs, x AS name FROM c")
    create(con, "STRING_IDS", [(1, "x")])
    con.commit()
    con.close()


def mixed_db():
    # two sessions in one database: rows 15,336 hours apart, and names that
    # are dtype lists (string ids pointing at another session's inputDtypes)
    con = fresh("mixed_sessions.db")
    s = Strings(1 << 28)
    later = T0 + 15_336 * 3600 * 1_000_000_000
    create(con, "PYTORCH_API", [
        [T0, T0 + 5_000, gtid(PID, MAIN), None, s.id("aten::add"), 1, 0, None, None, None, 50001],
        [T0 + 6_000, T0 + 9_000, gtid(PID, MAIN), None, s.id("DT_BF16;DT_BF16;DT_FLOAT"), 2, 0, None, None, None, 50001],
        [later, later + 4_000, gtid(4343, 4343), None, s.id("DT_BF16;DT_INT64"), 3, 0, None, None, None, 50001],
        [later + 5_000, later + 7_000, gtid(4343, 4343), None, s.id("aten::mul"), 4, 0, None, None, None, 50001],
    ])
    create(con, "STRING_IDS", s.rows())
    con.commit()
    con.close()


if __name__ == "__main__":
    pytorch_db()
    bad_dbs()
    mixed_db()
