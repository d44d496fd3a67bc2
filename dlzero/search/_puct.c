/* The PUCT rule of dlzero.search.select, the walk, backup, subtree size and compaction of dlzero.search.arena's
 * flat-array tree, and the priors' softmax of dlzero.search.mcts, compiled.
 *
 * Why C: in Python, choosing a child costs 3-8 us per tree level (numpy's per-call overhead on
 * small arrays, or a Python loop), and walking a level (virtual loss on numpy scalars, the child
 * slot, the board's push) as much again: most of the tree's time under a fast network. Here a whole
 * node is scored in well under a microsecond, and a level walked in about one.
 *
 * softmax_rows(logits, labels, temperature, out)
 *   mcts.softmax_rows_into' arithmetic: for each row j of `logits` (float32[B, L]) the softmax of
 *   logits[j, labels[j]] / temperature (labels: a list of int32 arrays), in float64, rounded to float32
 *   into `out` (float32[sum of the lengths]) one row after the other. One pass instead of some fifteen
 *   numpy calls per batch, and no per-row array made in Python: the caller slices `out`.
 *
 * The arena functions take the arena's record arrays (`nodes`: arena.NODE_DTYPE[], `edges`: arena.EDGE_DTYPE[],
 * writable and C-contiguous) and read them as the C structs ANode and AEdge; node and slot indices are checked
 * against the arrays (IndexError), so a bad index raises instead of writing past them. Every float is computed
 * with the same IEEE operations in the same order as the numpy code of arena.Arena (Arena(compiled=False)), so
 * both grow the same tree bit for bit (tests/test_search_arena.py drives both and compares every field).
 *
 * arena_layout() -> (node itemsize, edge itemsize, node field offsets, edge field offsets)
 *   The structs' layout, in the dtypes' field order: arena.py compares it with numpy's and uses the functions
 *   below only where they agree.
 *
 * arena_descend(nodes, edges, n_nodes, node, board, path, root_params, params, virtual_loss) -> (leaf, created)
 *   Arena.descend: from `node` down through expanded nodes (first >= 0) with no proven result (terminal NaN), each
 *   level choosing a slot by the rule above (`root_params` at `node` itself, None for `params` there too; N and W
 *   of an edge are its child's in_n and in_w, 0 where it has none), then Arena.step: the prior added to the
 *   node's visited_prior on the edge's first visit, the child created as node `n_nodes` where the edge has none,
 *   virtual loss added to the child's in_n and the node's visits, node and slot appended to the flat list `path`,
 *   the move pushed on `board`. Stops at the first node that is proven or not expanded and returns it with the
 *   number of nodes created: 0 or 1, as a new node is not expanded. The caller keeps room for that node
 *   (len(nodes) > n_nodes) and counts it. Where board.push raises, the level's two path entries go again and a
 *   node made at that level is unlinked from its edge (it is not counted); the virtual loss stays. `board` must
 *   not resize the arrays (the walk holds them).
 *
 * arena_backup(nodes, edges, path, leaf, value, correction)
 *   Arena.backup: `value` (a win rate for the leaf's side to move) added to the leaf, then flipped and added up
 *   `path` (to each child's in_w and each node's value_sum), `correction` (1 - virtual loss) added to every visit
 *   count on it. The whole path is checked before anything is written.
 *
 * arena_expand(nodes, edges, n_edges, node, moves, prior) -> n_edges
 *   Arena.expand: the node's edges are the next len(moves) records from `n_edges` (int64 moves, float32 priors, any
 *   strides; no child); returns the new edge count. Everything checked before a write.
 *
 * arena_settle(nodes, edges, n_edges, node, moves, prior, value, path, correction) -> n_edges
 *   Arena.settle: a leaf's network result at once: not pending, nn_value = value, arena_expand, arena_backup of
 *   `value` from the leaf up `path`. Everything checked before a write.
 *
 * arena_subtree_size(nodes, edges, root) -> (nodes, edges)
 *   The number of nodes below (and including) `root` and the summed edge counts of the expanded ones: the sizes
 *   arena_compact's output arrays need (Arena._subtree_counts). Iterative, with a PyMem queue.
 *
 * arena_compact(nodes, edges, root, out_nodes, out_edges)
 *   Arena.compact: the subtree of `root` copied into out_nodes and out_edges (new arrays, exactly the sizes
 *   arena_subtree_size gives) in Arena.subtree's breadth-first order, each record as it was except each node's
 *   `first` (its block in out_edges, blocks in node order; -1 where not expanded) and each edge's `child` (the
 *   child's new index; -1 where none).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static PyObject *s_push; /* interned "push": arena_descend calls board.push */

static int get_array(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize, const char *name,
                     int flags) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | flags) < 0) {
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != itemsize || view->format == NULL || strcmp(view->format, format) != 0) {
        PyErr_Format(PyExc_TypeError, "softmax_rows: %s must be a one-dimensional C-contiguous array of '%s'", name, format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* The positional-argument count a METH_FASTCALL function takes: 0, or -1 with a TypeError naming it. */
static int want_args(Py_ssize_t nargs, Py_ssize_t want, const char *name) {
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments", name, want);
        return -1;
    }
    return 0;
}

/* The rule's per-node constants: c(N) * sqrt(N) and the first-play urgency (select.exploration_constant and
 * select.first_play_urgency, operation for operation), as arena_descend scores a node. */
typedef struct {
    double cs, fpu;
} Puct;

static inline Puct puct_node(double parent_visits, double parent_value_sum, double visited_prior, double c_init,
                             double c_base, double fpu_reduction) {
    const double c = c_init + log((parent_visits + c_base + 1.0) / c_base);
    const double parent_q = parent_visits > 0 ? parent_value_sum / parent_visits : 0.5;
    const double fpu_raw = parent_q - fpu_reduction * sqrt(visited_prior);
    const Puct r = {c * (parent_visits > 0 ? sqrt(parent_visits) : 1.0), fpu_raw > 0.0 ? fpu_raw : 0.0};
    return r;
}

/* One move's score: select.puct_scores' q, then u = prior * cs, u /= 1 + n, q + u. */
static inline double puct_score(const Puct *r, double prior, double n, double w) {
    const double q = n > 0 ? w / n : r->fpu;
    double u = prior * r->cs;
    u /= 1.0 + n;
    return q + u;
}

static int get_params(PyObject *tuple, double out[3], const char *fn) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != 3) {
        PyErr_Format(PyExc_TypeError, "%s: PUCT params must be a tuple (c_init, c_base, fpu_reduction)", fn);
        return -1;
    }
    for (int j = 0; j < 3; j++) {
        out[j] = PyFloat_AsDouble(PyTuple_GET_ITEM(tuple, j));
        if (out[j] == -1.0 && PyErr_Occurred()) {
            return -1;
        }
    }
    return 0;
}

static PyObject *softmax_rows(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (want_args(nargs, 4, "softmax_rows") < 0) {
        return NULL;
    }
    PyObject *labels = args[1];
    const double temperature = PyFloat_AsDouble(args[2]);
    if (temperature == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyList_Check(labels)) {
        PyErr_SetString(PyExc_TypeError, "softmax_rows: labels must be a list of int32 arrays");
        return NULL;
    }
    Py_buffer lg, ov;
    if (PyObject_GetBuffer(args[0], &lg, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return NULL;
    }
    if (lg.ndim != 2 || lg.itemsize != 4 || lg.format == NULL || strcmp(lg.format, "f") != 0) {
        PyErr_SetString(PyExc_TypeError, "softmax_rows: logits must be a two-dimensional C-contiguous float32 array");
        PyBuffer_Release(&lg);
        return NULL;
    }
    if (get_array(args[3], &ov, "f", 4, "out", PyBUF_WRITABLE) < 0) {
        PyBuffer_Release(&lg);
        return NULL;
    }
    const Py_ssize_t rows = PyList_GET_SIZE(labels), width = lg.shape[1];
    float *out = (float *)ov.buf;
    Py_ssize_t at = 0;
    double *x = NULL;
    Py_ssize_t x_size = 0;
    int failed = rows > lg.shape[0];
    if (failed) {
        PyErr_SetString(PyExc_ValueError, "softmax_rows: more label rows than logits rows");
    }
    for (Py_ssize_t j = 0; j < rows && !failed; j++) {
        Py_buffer lv;
        if (get_array(PyList_GET_ITEM(labels, j), &lv, "i", 4, "labels", 0) < 0) {
            failed = 1;
            break;
        }
        const Py_ssize_t k = lv.shape[0];
        const int *lab = (const int *)lv.buf;
        const float *row = (const float *)lg.buf + j * width;
        if (k == 0 || at + k > ov.shape[0]) {
            PyErr_SetString(PyExc_ValueError, k == 0 ? "softmax_rows: a row has no labels"
                                                     : "softmax_rows: out is shorter than the labels");
            failed = 1;
        } else if (k > x_size) {
            double *grown = PyMem_Realloc(x, (size_t)k * sizeof(double));
            if (grown == NULL) {
                PyErr_NoMemory();
                failed = 1;
            } else {
                x = grown;
                x_size = k;
            }
        }
        double top = -INFINITY;
        for (Py_ssize_t i = 0; i < k && !failed; i++) {
            if (lab[i] < 0 || lab[i] >= width) {
                PyErr_SetString(PyExc_IndexError, "softmax_rows: a label is outside the logits");
                failed = 1;
                break;
            }
            x[i] = (double)row[lab[i]] / temperature;
            if (x[i] > top) {
                top = x[i];
            }
        }
        if (!failed) {
            double sum = 0.0;
            for (Py_ssize_t i = 0; i < k; i++) {
                x[i] = exp(x[i] - top);
                sum += x[i];
            }
            for (Py_ssize_t i = 0; i < k; i++) {
                out[at + i] = (float)(x[i] / sum);
            }
            at += k;
        }
        PyBuffer_Release(&lv);
    }
    PyMem_Free(x);
    PyBuffer_Release(&lg);
    PyBuffer_Release(&ov);
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* ---- the flat-array tree of dlzero.search.arena ---------------------------------------------------------- */

/* arena.NODE_DTYPE and arena.EDGE_DTYPE: numpy's align=True lays fields out as C does, and arena_layout hands the
 * sizes and offsets to the import, which falls back to numpy if they differ from the dtypes'. */
typedef struct {
    double visits, value_sum, in_n, in_w, visited_prior, nn_value, terminal;
    int32_t first;
    int16_t count, mate_plies;
    uint8_t pending;
} ANode;

typedef struct {
    int32_t move;
    float prior;
    int32_t child;
} AEdge;

/* One arena's two record arrays, held for a call. */
typedef struct {
    Py_buffer nv, ev;
    ANode *node;
    AEdge *edge;
    Py_ssize_t n_len, e_len;
} Arena;

/* A writable one-dimensional C-contiguous array of `itemsize`-byte records (the format is not asked for: the
 * import checked the layout once), or -1 with a TypeError naming it. */
static int get_records(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *fn, const char *name,
                       const char *dtype) {
    if (PyObject_GetBuffer(obj, view, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) {
        if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
            return -1;
        }
        PyErr_Clear();
    } else if (view->ndim == 1 && view->itemsize == itemsize) {
        return 0;
    } else {
        PyBuffer_Release(view);
    }
    PyErr_Format(PyExc_TypeError,
                 "%s: %s must be a writable one-dimensional C-contiguous array of %s records, not %.200s", fn, name,
                 dtype, Py_TYPE(obj)->tp_name);
    return -1;
}

static int arena_get(Arena *a, PyObject *nodes, PyObject *edges, const char *fn, const char *nodes_name,
                     const char *edges_name) {
    if (get_records(nodes, &a->nv, sizeof(ANode), fn, nodes_name, "NODE_DTYPE") < 0) {
        return -1;
    }
    if (get_records(edges, &a->ev, sizeof(AEdge), fn, edges_name, "EDGE_DTYPE") < 0) {
        PyBuffer_Release(&a->nv);
        return -1;
    }
    a->node = (ANode *)a->nv.buf;
    a->edge = (AEdge *)a->ev.buf;
    a->n_len = a->nv.shape[0];
    a->e_len = a->ev.shape[0];
    return 0;
}

static void arena_release(Arena *a) {
    PyBuffer_Release(&a->nv);
    PyBuffer_Release(&a->ev);
}

/* An integer argument (an int or anything with __index__): 0, or -1 with a TypeError naming it (IndexError
 * where it does not fit a Py_ssize_t). */
static int get_index(PyObject *obj, Py_ssize_t *out, const char *fn, const char *name) {
    *out = PyNumber_AsSsize_t(obj, PyExc_IndexError);
    if (*out == -1 && PyErr_Occurred()) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "%s: %s must be an integer, not %.200s", fn, name, Py_TYPE(obj)->tp_name);
        }
        return -1;
    }
    return 0;
}

static int check_node(Py_ssize_t i, Py_ssize_t n, const char *fn, const char *what) {
    if (i < 0 || i >= n) {
        PyErr_Format(PyExc_IndexError, "%s: %s %zd is outside the %zd nodes", fn, what, i, n);
        return -1;
    }
    return 0;
}

/* Node `i`'s edge block, if it is expanded, inside the edge array (a count of 0 is allowed here): 0, or -1 with
 * an IndexError. */
static int check_block(const Arena *a, Py_ssize_t i, const char *fn) {
    const ANode *nd = &a->node[i];
    if (nd->first >= 0 && (nd->count < 0 || (Py_ssize_t)nd->first + nd->count > a->e_len)) {
        PyErr_Format(PyExc_IndexError, "%s: node %zd's edges (first %d, count %d) lie outside the %zd edges", fn, i,
                     (int)nd->first, (int)nd->count, a->e_len);
        return -1;
    }
    return 0;
}

/* arena._BLANK: no visits, no network value, no proof, not expanded (padding zeroed). */
static void blank_node(ANode *nd) {
    memset(nd, 0, sizeof *nd);
    nd->nn_value = NAN;
    nd->terminal = NAN;
    nd->first = -1;
    nd->mate_plies = -1;
}

static PyObject *arena_layout(PyObject *self, PyObject *unused) {
    (void)self;
    (void)unused;
    return Py_BuildValue("(nn(nnnnnnnnnnn)(nnn))", (Py_ssize_t)sizeof(ANode), (Py_ssize_t)sizeof(AEdge),
                         (Py_ssize_t)offsetof(ANode, visits), (Py_ssize_t)offsetof(ANode, value_sum),
                         (Py_ssize_t)offsetof(ANode, in_n), (Py_ssize_t)offsetof(ANode, in_w),
                         (Py_ssize_t)offsetof(ANode, visited_prior), (Py_ssize_t)offsetof(ANode, nn_value),
                         (Py_ssize_t)offsetof(ANode, terminal), (Py_ssize_t)offsetof(ANode, first),
                         (Py_ssize_t)offsetof(ANode, count), (Py_ssize_t)offsetof(ANode, mate_plies),
                         (Py_ssize_t)offsetof(ANode, pending), (Py_ssize_t)offsetof(AEdge, move),
                         (Py_ssize_t)offsetof(AEdge, prior), (Py_ssize_t)offsetof(AEdge, child));
}

/* Append node `i` and `slot` to `path`: 0, or -1 with an error set and `path` as it was. */
static int path_append(PyObject *path, Py_ssize_t i, Py_ssize_t slot) {
    const Py_ssize_t before = PyList_GET_SIZE(path);
    PyObject *pi = PyLong_FromSsize_t(i);
    PyObject *ps = pi == NULL ? NULL : PyLong_FromSsize_t(slot);
    const int ok = ps != NULL && PyList_Append(path, pi) == 0 && PyList_Append(path, ps) == 0;
    Py_XDECREF(pi);
    Py_XDECREF(ps);
    if (!ok && PyList_GET_SIZE(path) > before) {
        PyList_SetSlice(path, before, PyList_GET_SIZE(path), NULL);
    }
    return ok ? 0 : -1;
}

static PyObject *arena_descend(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char fn[] = "arena_descend";
    if (want_args(nargs, 9, fn) < 0) {
        return NULL;
    }
    PyObject *board = args[4], *path = args[5];
    if (!PyList_Check(path)) {
        PyErr_SetString(PyExc_TypeError, "arena_descend: path must be a list");
        return NULL;
    }
    double root_params[3], params[3];
    const int own_root = args[6] != Py_None;
    if ((own_root && get_params(args[6], root_params, fn) < 0) || get_params(args[7], params, fn) < 0) {
        return NULL;
    }
    const double vl = PyFloat_AsDouble(args[8]);
    if (vl == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    Py_ssize_t n_nodes, i;
    if (get_index(args[2], &n_nodes, fn, "n_nodes") < 0 || get_index(args[3], &i, fn, "node") < 0) {
        return NULL;
    }
    Arena a;
    if (arena_get(&a, args[0], args[1], fn, "nodes", "edges") < 0) {
        return NULL;
    }
    PyObject *result = NULL;
    if (n_nodes < 0 || n_nodes >= a.n_len || n_nodes > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "arena_descend: n_nodes %zd leaves no room for a new node in %zd records",
                     n_nodes, a.n_len);
        goto done;
    }
    if (check_node(i, n_nodes, fn, "node") < 0) {
        goto done;
    }
    Py_ssize_t created = 0;
    const double *here = own_root ? root_params : params;
    for (;;) {
        ANode *nd = &a.node[i];
        /* the walk goes on through expanded nodes (first >= 0) that hold no proven result (terminal NaN) */
        if (!(nd->terminal != nd->terminal) || nd->first < 0) {
            break;
        }
        if (check_block(&a, i, fn) < 0) {
            goto done;
        }
        if (nd->count == 0) {
            PyErr_Format(PyExc_ValueError, "arena_descend: expanded node %zd has no edges", i);
            goto done;
        }
        AEdge *block = a.edge + nd->first;
        /* Arena.select: the rule over the edges, N and W read from the children (0 where there is none) */
        const Puct r = puct_node(nd->visits, nd->value_sum, nd->visited_prior, here[0], here[1], here[2]);
        Py_ssize_t slot = -1;
        double best = -INFINITY;
        for (Py_ssize_t k = 0; k < nd->count; k++) {
            const int32_t c = block[k].child;
            double n = 0.0, w = 0.0;
            if (c >= 0) {
                if (c >= n_nodes) {
                    PyErr_Format(PyExc_IndexError, "arena_descend: node %zd's edge %zd leads to node %d, outside the "
                                 "%zd nodes", i, k, (int)c, n_nodes);
                    goto done;
                }
                n = a.node[c].in_n;
                w = a.node[c].in_w;
            }
            const double score = puct_score(&r, (double)block[k].prior, n, w);
            if (score > best || slot < 0) {
                best = score;
                slot = k;
            }
        }
        /* Arena.step: the path first (a list that cannot grow leaves this level untouched), then visited prior on
           a first visit, the child (created if new), virtual loss on the edge and the node, the board's move */
        if (path_append(path, i, slot) < 0) {
            goto done;
        }
        AEdge *e = &block[slot];
        int32_t c = e->child;
        if (c < 0 || a.node[c].in_n == 0) {
            nd->visited_prior += (double)e->prior;
        }
        const int made = c < 0;
        if (made) {
            c = (int32_t)n_nodes;
            blank_node(&a.node[c]);
            e->child = c;
            created = 1;
        }
        a.node[c].in_n += vl;
        nd->visits += vl;
        PyObject *move = PyLong_FromLong(e->move);
        PyObject *pushed = move == NULL ? NULL : PyObject_CallMethodOneArg(board, s_push, move);
        Py_XDECREF(move);
        if (pushed == NULL) {
            /* the move is not on the board, so its path entries go again (the caller pops once per pair); the virtual
               loss stays, as a board that refuses a move ends the search; a node made here is unlinked, since the
               caller, getting no count back, does not take it into n_nodes */
            PyList_SetSlice(path, PyList_GET_SIZE(path) - 2, PyList_GET_SIZE(path), NULL);
            if (made) {
                e->child = -1;
            }
            goto done;
        }
        Py_DECREF(pushed);
        i = c;
        here = params;
    }
    result = Py_BuildValue("(nn)", i, created);
done:
    arena_release(&a);
    return result;
}

/* A backup's path, checked whole and turned into (node, child) pairs before anything is written: the pairs
 * (`stack` when they fit its 256 entries, else a PyMem array the caller frees) and their number in *levels; or
 * NULL with an error set. */
static Py_ssize_t *backup_pairs(const Arena *a, PyObject *path, Py_ssize_t leaf, Py_ssize_t stack[256],
                                Py_ssize_t *levels, const char *fn) {
    if (!PyList_Check(path) || PyList_GET_SIZE(path) % 2 != 0) {
        PyErr_Format(PyList_Check(path) ? PyExc_ValueError : PyExc_TypeError,
                     "%s: path must be a list of (node, slot) pairs, flat: [node, slot, node, slot, ...]", fn);
        return NULL;
    }
    if (check_node(leaf, a->n_len, fn, "leaf") < 0) {
        return NULL;
    }
    *levels = PyList_GET_SIZE(path) / 2;
    Py_ssize_t *pairs = stack;
    if (*levels * 2 > 256) {
        pairs = PyMem_Malloc((size_t)*levels * 2 * sizeof(Py_ssize_t));
        if (pairs == NULL) {
            PyErr_NoMemory();
            return NULL;
        }
    }
    int failed = 0;
    for (Py_ssize_t j = 0; j < *levels && !failed; j++) {
        Py_ssize_t node, slot;
        failed = 1;
        if (2 * j + 1 >= PyList_GET_SIZE(path)) {  /* (an __index__ that shrank the list) */
            PyErr_Format(PyExc_ValueError, "%s: path changed size", fn);
            break;
        }
        PyObject *pn = PyList_GET_ITEM(path, 2 * j), *ps = PyList_GET_ITEM(path, 2 * j + 1);
        Py_INCREF(pn);
        Py_INCREF(ps);
        const int ints = get_index(pn, &node, fn, "a path node") == 0 && get_index(ps, &slot, fn, "a path slot") == 0;
        Py_DECREF(pn);
        Py_DECREF(ps);
        if (!ints || check_node(node, a->n_len, fn, "path node") < 0 || check_block(a, node, fn) < 0) {
            break;
        }
        const ANode *nd = &a->node[node];
        if (nd->first < 0) {
            PyErr_Format(PyExc_ValueError, "%s: path node %zd is not expanded", fn, node);
            break;
        }
        if (slot < 0 || slot >= nd->count) {
            PyErr_Format(PyExc_IndexError, "%s: slot %zd is outside node %zd's %d edges", fn, slot, node,
                         (int)nd->count);
            break;
        }
        const int32_t child = a->edge[nd->first + slot].child;
        if (child < 0 || child >= a->n_len) {
            PyErr_Format(PyExc_IndexError, "%s: slot %zd of node %zd leads to no node (child %d)", fn, slot, node,
                         (int)child);
            break;
        }
        pairs[2 * j] = node;
        pairs[2 * j + 1] = child;
        failed = 0;
    }
    if (failed) {
        if (pairs != stack) {
            PyMem_Free(pairs);
        }
        return NULL;
    }
    return pairs;
}

/* Arena.backup's arithmetic, operation for operation, over checked pairs. */
static void backup_apply(Arena *a, const Py_ssize_t *pairs, Py_ssize_t levels, Py_ssize_t leaf, double value,
                         double correction) {
    a->node[leaf].visits += 1.0;
    a->node[leaf].value_sum += value;
    for (Py_ssize_t j = levels - 1; j >= 0; j--) {
        ANode *nd = &a->node[pairs[2 * j]], *ch = &a->node[pairs[2 * j + 1]];
        value = 1.0 - value;
        ch->in_n += correction;
        ch->in_w += value;
        nd->visits += correction;
        nd->value_sum += value;
    }
}

static PyObject *arena_backup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char fn[] = "arena_backup";
    if (want_args(nargs, 6, fn) < 0) {
        return NULL;
    }
    Py_ssize_t leaf;
    if (get_index(args[3], &leaf, fn, "leaf") < 0) {
        return NULL;
    }
    const double value = PyFloat_AsDouble(args[4]);
    const double correction = PyFloat_AsDouble(args[5]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    Arena a;
    if (arena_get(&a, args[0], args[1], fn, "nodes", "edges") < 0) {
        return NULL;
    }
    Py_ssize_t stack[256], levels;
    Py_ssize_t *pairs = backup_pairs(&a, args[2], leaf, stack, &levels, fn);
    if (pairs != NULL) {
        backup_apply(&a, pairs, levels, leaf, value, correction);
        if (pairs != stack) {
            PyMem_Free(pairs);
        }
    }
    arena_release(&a);
    if (pairs == NULL) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* A one-dimensional array argument of `itemsize`-byte items in one of `formats` (any strides, read-only), or -1
 * with a TypeError naming it. */
static int get_strided(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *const *formats,
                       const char *fn, const char *name, const char *want) {
    if (PyObject_GetBuffer(obj, view, PyBUF_RECORDS_RO) == 0) {
        if (view->ndim == 1 && view->itemsize == itemsize && view->format != NULL) {
            for (const char *const *f = formats; *f != NULL; f++) {
                if (strcmp(view->format, *f) == 0) {
                    return 0;
                }
            }
        }
        PyBuffer_Release(view);
    } else if (PyErr_ExceptionMatches(PyExc_MemoryError)) {
        return -1;
    } else {
        PyErr_Clear();
    }
    PyErr_Format(PyExc_TypeError, "%s: %s must be a one-dimensional array of %s, not %.200s", fn, name, want,
                 Py_TYPE(obj)->tp_name);
    return -1;
}

/* Node `node`'s edges from record `n_edges` on: each move (int64, cast as numpy casts to int32: cshogi's moves fit)
 * with its prior and no child; the node's first and count. The caller checked the room and the lengths. */
static void write_edges(Arena *a, Py_ssize_t n_edges, Py_ssize_t node, const Py_buffer *mv, const Py_buffer *pv) {
    const Py_ssize_t k = mv->shape[0];
    AEdge *block = a->edge + n_edges;
    const char *m = (const char *)mv->buf, *p = (const char *)pv->buf;
    for (Py_ssize_t j = 0; j < k; j++) {
        int64_t move;
        float prior;
        memcpy(&move, m + j * mv->strides[0], sizeof move);
        memcpy(&prior, p + j * pv->strides[0], sizeof prior);
        block[j].move = (int32_t)move;
        block[j].prior = prior;
        block[j].child = -1;
    }
    a->node[node].first = (int32_t)n_edges;
    a->node[node].count = (int16_t)k;
}

/* Arguments 2-5 of arena_expand and arena_settle: n_edges, node, moves (int64) and prior (float32), any strides.
 * 0 with both buffers held (the caller releases them), or -1 with an error set and none held. */
static int get_expansion(PyObject *const *args, const char *fn, Py_ssize_t *n_edges, Py_ssize_t *node, Py_buffer *mv,
                         Py_buffer *pv) {
    static const char *const int64_formats[] = {"l", "q", "<l", "<q", "=l", "=q", NULL};
    static const char *const float32_formats[] = {"f", "<f", "=f", NULL};
    if (get_index(args[2], n_edges, fn, "n_edges") < 0 || get_index(args[3], node, fn, "node") < 0) {
        return -1;
    }
    if (get_strided(args[4], mv, 8, int64_formats, fn, "moves", "int64") < 0) {
        return -1;
    }
    if (get_strided(args[5], pv, 4, float32_formats, fn, "prior", "float32") < 0) {
        PyBuffer_Release(mv);
        return -1;
    }
    return 0;
}

/* An expansion fits: as many priors as moves, a count a node holds, room in the edge array, an existing node. 0, or
 * -1 with an error set. */
static int check_expansion(const Arena *a, const Py_buffer *mv, const Py_buffer *pv, Py_ssize_t n_edges,
                           Py_ssize_t node, const char *fn) {
    const Py_ssize_t k = mv->shape[0];
    if (pv->shape[0] != k) {
        PyErr_Format(PyExc_ValueError, "%s: %zd moves but %zd priors", fn, k, pv->shape[0]);
    } else if (k > INT16_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: %zd moves do not fit a node's edge count", fn, k);
    } else if (n_edges < 0 || n_edges + k > a->e_len || n_edges + k > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "%s: %zd edges from %zd do not fit %zd records", fn, k, n_edges, a->e_len);
    } else {
        return check_node(node, a->n_len, fn, "node");
    }
    return -1;
}

/* Arena.expand: node `node`'s edges are the next len(moves) records from `n_edges` on (move, prior, no child);
 * returns the new edge count. Checked before anything is written: the room, the node, the lengths. */
static PyObject *arena_expand(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char fn[] = "arena_expand";
    Py_ssize_t n_edges, node;
    Py_buffer mv, pv;
    if (want_args(nargs, 6, fn) < 0 || get_expansion(args, fn, &n_edges, &node, &mv, &pv) < 0) {
        return NULL;
    }
    Arena a;
    PyObject *result = NULL;
    if (arena_get(&a, args[0], args[1], fn, "nodes", "edges") == 0) {
        if (check_expansion(&a, &mv, &pv, n_edges, node, fn) == 0) {
            write_edges(&a, n_edges, node, &mv, &pv);
            result = PyLong_FromSsize_t(n_edges + mv.shape[0]);
        }
        arena_release(&a);
    }
    PyBuffer_Release(&mv);
    PyBuffer_Release(&pv);
    return result;
}

/* Arena.settle: a leaf's network result in one call, as Arena.set_pending(False), set_nn_value, expand and backup
 * would write it; everything (the room, the lengths, the node, the whole path) checked before the first write. */
static PyObject *arena_settle(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char fn[] = "arena_settle";
    if (want_args(nargs, 9, fn) < 0) {
        return NULL;
    }
    const double value = PyFloat_AsDouble(args[6]);
    const double correction = PyFloat_AsDouble(args[8]);
    Py_ssize_t n_edges, node;
    Py_buffer mv, pv;
    if (PyErr_Occurred() || get_expansion(args, fn, &n_edges, &node, &mv, &pv) < 0) {
        return NULL;
    }
    Arena a;
    PyObject *result = NULL;
    if (arena_get(&a, args[0], args[1], fn, "nodes", "edges") == 0) {
        Py_ssize_t stack[256], levels;
        Py_ssize_t *pairs = NULL;
        if (check_expansion(&a, &mv, &pv, n_edges, node, fn) == 0) {
            pairs = backup_pairs(&a, args[7], node, stack, &levels, fn);
        }
        if (pairs != NULL) {
            ANode *nd = &a.node[node];
            nd->pending = 0;
            nd->nn_value = value;
            write_edges(&a, n_edges, node, &mv, &pv);
            backup_apply(&a, pairs, levels, node, value, correction);
            if (pairs != stack) {
                PyMem_Free(pairs);
            }
            result = PyLong_FromSsize_t(n_edges + mv.shape[0]);
        }
        arena_release(&a);
    }
    PyBuffer_Release(&mv);
    PyBuffer_Release(&pv);
    return result;
}

/* Arena.subtree's order: `root`, then for each listed node its children in edge order (breadth first). Returns a
 * PyMem array of node indices, their number in *count and the summed counts of the expanded ones in *n_edges; or
 * NULL with an error set where a block or a child lies outside the arrays, or the walk lists more nodes than the
 * array holds (the edges form a cycle). Iterative: a tree may be a million nodes deep. */
static int32_t *subtree_order(const Arena *a, Py_ssize_t root, Py_ssize_t *count, Py_ssize_t *n_edges,
                              const char *fn) {
    if (check_node(root, a->n_len, fn, "root") < 0) {
        return NULL;
    }
    Py_ssize_t cap = a->n_len < 1024 ? a->n_len : 1024, len = 1, edges = 0;
    int32_t *order = PyMem_Malloc((size_t)cap * sizeof(int32_t));
    if (order == NULL) {
        PyErr_NoMemory();
        return NULL;
    }
    order[0] = (int32_t)root;
    for (Py_ssize_t k = 0; k < len; k++) {
        const Py_ssize_t i = order[k];
        if (check_block(a, i, fn) < 0) {
            PyMem_Free(order);
            return NULL;
        }
        const ANode *nd = &a->node[i];
        if (nd->first < 0) {
            continue;
        }
        edges += nd->count;
        const AEdge *block = a->edge + nd->first;
        for (Py_ssize_t j = 0; j < nd->count; j++) {
            const int32_t c = block[j].child;
            if (c < 0) {
                continue;
            }
            if (c >= a->n_len || len == a->n_len) {
                PyErr_Format(c >= a->n_len ? PyExc_IndexError : PyExc_ValueError,
                             c >= a->n_len ? "%s: node %zd's edge %zd leads to node %d, outside the %zd nodes"
                                           : "%s: node %zd's edge %zd leads to node %d, one too many for %zd nodes: "
                                             "the edges form a cycle",
                             fn, i, j, (int)c, a->n_len);
                PyMem_Free(order);
                return NULL;
            }
            if (len == cap) {
                cap = cap > a->n_len / 2 ? a->n_len : cap * 2;
                int32_t *grown = PyMem_Realloc(order, (size_t)cap * sizeof(int32_t));
                if (grown == NULL) {
                    PyMem_Free(order);
                    PyErr_NoMemory();
                    return NULL;
                }
                order = grown;
            }
            order[len++] = c;
        }
    }
    *count = len;
    *n_edges = edges;
    return order;
}

static PyObject *arena_subtree_size(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char fn[] = "arena_subtree_size";
    Py_ssize_t root, count, edges;
    if (want_args(nargs, 3, fn) < 0 || get_index(args[2], &root, fn, "root") < 0) {
        return NULL;
    }
    Arena a;
    if (arena_get(&a, args[0], args[1], fn, "nodes", "edges") < 0) {
        return NULL;
    }
    int32_t *order = subtree_order(&a, root, &count, &edges, fn);
    arena_release(&a);
    if (order == NULL) {
        return NULL;
    }
    PyMem_Free(order);
    return Py_BuildValue("(nn)", count, edges);
}

static int overlaps(const Py_buffer *x, const Py_buffer *y) {
    const char *xs = x->buf, *ys = y->buf;
    return xs < ys + y->len && ys < xs + x->len;
}

static PyObject *arena_compact(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    static const char fn[] = "arena_compact";
    Py_ssize_t root, count, edges;
    if (want_args(nargs, 5, fn) < 0 || get_index(args[2], &root, fn, "root") < 0) {
        return NULL;
    }
    Arena a, out;
    if (arena_get(&a, args[0], args[1], fn, "nodes", "edges") < 0) {
        return NULL;
    }
    if (arena_get(&out, args[3], args[4], fn, "out_nodes", "out_edges") < 0) {
        arena_release(&a);
        return NULL;
    }
    PyObject *result = NULL;
    int32_t *order = NULL;
    if (overlaps(&out.nv, &a.nv) || overlaps(&out.nv, &a.ev) || overlaps(&out.ev, &a.nv) || overlaps(&out.ev, &a.ev)
        || overlaps(&out.nv, &out.ev)) {
        PyErr_SetString(PyExc_ValueError, "arena_compact: out_nodes and out_edges must be new arrays of their own");
        goto done;
    }
    if ((order = subtree_order(&a, root, &count, &edges, fn)) == NULL) {
        goto done;
    }
    if (out.n_len != count || out.e_len != edges || edges > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "arena_compact: the subtree has %zd nodes and %zd edges (arena_subtree_size); "
                     "out_nodes and out_edges hold %zd and %zd", count, edges, out.n_len, out.e_len);
        goto done;
    }
    /* records copied as they are in Arena.subtree's order, each node's block following the one before; a child
       listed k-th by subtree_order is node k of the copy, and the edges reach the children in that same order */
    Py_ssize_t cursor = 0, next = 1;
    for (Py_ssize_t k = 0; k < count; k++) {
        const ANode *src = &a.node[order[k]];
        ANode *dst = &out.node[k];
        memcpy(dst, src, sizeof *dst);
        if (src->first < 0) {
            dst->first = -1;
            continue;
        }
        dst->first = (int32_t)cursor;
        memcpy(out.edge + cursor, a.edge + src->first, (size_t)src->count * sizeof(AEdge));
        for (Py_ssize_t j = 0; j < src->count; j++) {
            AEdge *e = &out.edge[cursor + j];
            e->child = e->child >= 0 ? (int32_t)next++ : -1;
        }
        cursor += src->count;
    }
    result = Py_None;
    Py_INCREF(result);
done:
    PyMem_Free(order);
    arena_release(&out);
    arena_release(&a);
    return result;
}

static PyMethodDef methods[] = {
    {"softmax_rows", (PyCFunction)(void (*)(void))softmax_rows, METH_FASTCALL,
     "Softmax of each row's logits at its labels (see dlzero.search.mcts.softmax_rows_into)."},
    {"arena_layout", arena_layout, METH_NOARGS,
     "(node itemsize, edge itemsize, node field offsets, edge field offsets) of the C structs."},
    {"arena_descend", (PyCFunction)(void (*)(void))arena_descend, METH_FASTCALL,
     "Walk down an arena by the PUCT rule with virtual loss (see dlzero.search.arena.Arena.descend)."},
    {"arena_expand", (PyCFunction)(void (*)(void))arena_expand, METH_FASTCALL,
     "Attach moves and priors to a node of an arena (see dlzero.search.arena.Arena.expand)."},
    {"arena_settle", (PyCFunction)(void (*)(void))arena_settle, METH_FASTCALL,
     "A leaf's network result: not pending, its value, its moves and priors, the backup (see Arena.settle)."},
    {"arena_backup", (PyCFunction)(void (*)(void))arena_backup, METH_FASTCALL,
     "Add a leaf's value up its path in an arena (see dlzero.search.arena.Arena.backup)."},
    {"arena_subtree_size", (PyCFunction)(void (*)(void))arena_subtree_size, METH_FASTCALL,
     "(nodes, edges) of the subtree below a node (see dlzero.search.arena.Arena.subtree_size)."},
    {"arena_compact", (PyCFunction)(void (*)(void))arena_compact, METH_FASTCALL,
     "Copy the subtree below a node into new arrays (see dlzero.search.arena.Arena.compact)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_puct",
    .m_doc = "dlzero's PUCT selection, arena tree walk, backup, subtree size and compaction, and priors' "
             "softmax, compiled.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__puct(void) {
    if ((s_push = PyUnicode_InternFromString("push")) == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
