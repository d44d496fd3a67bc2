/* The PUCT rule of dlzero.search.select, and the descent and backup of dlzero.search.mcts, compiled.
 *
 * Why C: in Python, choosing a child costs 3-8 us per tree level (numpy's per-call overhead on
 * small arrays, or a Python loop), and walking a level (virtual loss on numpy scalars, the child
 * slot, the board's push) as much again: most of the tree's time under a fast network. Here a whole
 * node is scored in well under a microsecond, and a level walked in about one.
 *
 * select(prior, n, w, parent_visits, parent_value_sum, visited_prior, c_init, c_base, fpu_reduction)
 *   prior: float32[k] (or float64), n and w: float64[k], all C-contiguous; returns the index of the best score,
 *   the lowest index among equals. Every score is computed with the same IEEE operations in the
 *   same order as select.puct_scores (build with -ffp-contract=off), so the choice is bit for bit
 *   the numpy one; tests/test_select.py checks it against numpy on random and tied arrays.
 *
 * descend(node, board, path, root_params, params, virtual_loss, node_type) -> (stop_node, created)
 *   Search._descend's walk, level for level: from `node` down through expanded nodes with no proven
 *   result, each step choosing by the rule above (`root_params` (c_init, c_base, fpu_reduction) at
 *   `node` itself, None to use `params` there too), adding virtual loss, appending (node, i) to the
 *   list `path`, creating the child (`node_type()`) where the slot is empty and pushing its move on
 *   the cshogi `board`. Stops at the first node that is not expanded or holds a proven result and
 *   returns it with the number of children created. The caller settles that node and pops the board.
 *
 * backup(path, leaf, value, correction)
 *   Search._backup's arithmetic: `value` (a win rate for the leaf's side to move) added to the leaf,
 *   then flipped and added up `path`, `correction` (1 - virtual loss) added to every visit count.
 *
 * softmax_rows(logits, labels, temperature, out)
 *   mcts.softmax_rows_into' arithmetic: for each row j of `logits` (float32[B, L]) the softmax of
 *   logits[j, labels[j]] / temperature (labels: a list of int32 arrays), in float64, rounded to float32
 *   into `out` (float32[sum of the lengths]) one row after the other. One pass instead of some fifteen
 *   numpy calls per batch, and no per-row array made in Python: the caller slices `out`.
 *
 * The Node fields are read and written through their Python attributes, as the Python code does, so
 * a tree built here and one built there are the same objects with the same floats (tests/test_search.py
 * grows both and compares them bit for bit).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

static PyObject *s_terminal, *s_moves, *s_prior, *s_n, *s_w, *s_children, *s_visits, *s_value_sum,
    *s_visited_prior, *s_push;

static int get_array(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize, const char *name,
                     int flags) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | flags) < 0) {
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != itemsize || view->format == NULL || strcmp(view->format, format) != 0) {
        PyErr_Format(PyExc_TypeError, "select: %s must be a one-dimensional C-contiguous array of '%s'", name, format);
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

/* A node's three edge arrays, held while one node is scored (and, for descend, updated). */
typedef struct {
    Py_buffer p, n, w;
    int prior_f32;
    Py_ssize_t k;
} Edges;

static void edges_release(Edges *e) {
    PyBuffer_Release(&e->p);
    PyBuffer_Release(&e->n);
    PyBuffer_Release(&e->w);
}

static int edges_get(Edges *e, PyObject *prior, PyObject *n, PyObject *w, int writable) {
    if (PyObject_GetBuffer(prior, &e->p, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    e->prior_f32 = e->p.format != NULL && strcmp(e->p.format, "f") == 0 && e->p.itemsize == 4;
    const int prior_f64 = e->p.format != NULL && strcmp(e->p.format, "d") == 0 && e->p.itemsize == 8;
    if (e->p.ndim != 1 || !(e->prior_f32 || prior_f64)) {
        PyErr_SetString(PyExc_TypeError, "select: prior must be a one-dimensional C-contiguous float32 or float64 array");
        PyBuffer_Release(&e->p);
        return -1;
    }
    const int flags = writable ? PyBUF_WRITABLE : 0;
    if (get_array(n, &e->n, "d", 8, "n", flags) < 0) {
        PyBuffer_Release(&e->p);
        return -1;
    }
    if (get_array(w, &e->w, "d", 8, "w", flags) < 0) {
        PyBuffer_Release(&e->p);
        PyBuffer_Release(&e->n);
        return -1;
    }
    e->k = e->p.shape[0];
    if (e->n.shape[0] != e->k || e->w.shape[0] != e->k) {
        PyErr_SetString(PyExc_ValueError, "select: prior, n and w must have the same length");
        edges_release(e);
        return -1;
    }
    return 0;
}

static inline double prior_at(const Edges *e, Py_ssize_t i) {
    return e->prior_f32 ? (double)((const float *)e->p.buf)[i] : ((const double *)e->p.buf)[i];
}

/* The rule itself: select.exploration_constant and select.first_play_urgency, operation for operation. */
static Py_ssize_t best_index(const Edges *e, double parent_visits, double parent_value_sum, double visited_prior,
                             double c_init, double c_base, double fpu_reduction) {
    const double *n = (const double *)e->n.buf, *w = (const double *)e->w.buf;
    const double c = c_init + log((parent_visits + c_base + 1.0) / c_base);
    const double cs = c * (parent_visits > 0 ? sqrt(parent_visits) : 1.0);
    const double parent_q = parent_visits > 0 ? parent_value_sum / parent_visits : 0.5;
    const double fpu_raw = parent_q - fpu_reduction * sqrt(visited_prior);
    const double fpu = fpu_raw > 0.0 ? fpu_raw : 0.0;

    Py_ssize_t best_i = -1;
    double best = -INFINITY;
    for (Py_ssize_t i = 0; i < e->k; i++) {
        const double ni = n[i];
        const double q = ni > 0 ? w[i] / ni : fpu;
        double u = prior_at(e, i) * cs;
        u /= 1.0 + ni;
        const double score = q + u;
        if (score > best || best_i < 0) {
            best = score;
            best_i = i;
        }
    }
    return best_i;
}

static PyObject *select_move(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (want_args(nargs, 9, "select") < 0) {
        return NULL;
    }
    double scalars[6];
    for (int j = 0; j < 6; j++) {
        scalars[j] = PyFloat_AsDouble(args[3 + j]);
        if (scalars[j] == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
    }
    Edges e;
    if (edges_get(&e, args[0], args[1], args[2], 0) < 0) {
        return NULL;
    }
    const Py_ssize_t best_i = best_index(&e, scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5]);
    edges_release(&e);
    return PyLong_FromSsize_t(best_i);
}

/* A float attribute of a node (visits, value_sum, visited_prior: Python floats). */
static int get_double(PyObject *obj, PyObject *name, double *out) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    *out = PyFloat_AsDouble(v);
    Py_DECREF(v);
    return (*out == -1.0 && PyErr_Occurred()) ? -1 : 0;
}

/* Whether attribute `name` of `obj` is None: 1 or 0, or -1 with an error set. */
static int is_none(PyObject *obj, PyObject *name) {
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    const int none = v == Py_None;
    Py_DECREF(v);
    return none;
}

static int set_double(PyObject *obj, PyObject *name, double value) {
    PyObject *v = PyFloat_FromDouble(value);
    if (v == NULL) {
        return -1;
    }
    const int rc = PyObject_SetAttr(obj, name, v);
    Py_DECREF(v);
    return rc;
}

static int get_params(PyObject *tuple, double out[3]) {
    if (!PyTuple_Check(tuple) || PyTuple_GET_SIZE(tuple) != 3) {
        PyErr_SetString(PyExc_TypeError, "descend: PUCT params must be a tuple (c_init, c_base, fpu_reduction)");
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

/* The move in slot `i` of a node's `moves` (int64[k]), or -1 with an error set. */
static long long move_at(PyObject *moves, Py_ssize_t k, Py_ssize_t i) {
    Py_buffer mv;
    if (PyObject_GetBuffer(moves, &mv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    const int ok = mv.ndim == 1 && mv.itemsize == 8 && mv.shape[0] == k && mv.format != NULL
                   && (strcmp(mv.format, "l") == 0 || strcmp(mv.format, "q") == 0);
    const long long move = ok ? ((const long long *)mv.buf)[i] : -1;
    PyBuffer_Release(&mv);
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "descend: moves must be a one-dimensional C-contiguous int64 array "
                                         "of the node's size");
    }
    return move;
}

/* One level of descend at `node` (expanded, unproven): the child's new reference, or NULL with an error set
 * (then nothing of the node has changed, except where the board's push itself failed). */
static PyObject *step(PyObject *node, PyObject *board, PyObject *path, const double params[3], double vl,
                      PyObject *node_type, long *created) {
    PyObject *moves = NULL, *prior = NULL, *n = NULL, *w = NULL, *children = NULL, *child = NULL;
    PyObject *result = NULL;
    Edges e;
    int have_edges = 0;
    double visits, value_sum, visited_prior;
    if (get_double(node, s_visits, &visits) < 0 || get_double(node, s_value_sum, &value_sum) < 0
        || get_double(node, s_visited_prior, &visited_prior) < 0) {
        return NULL;
    }
    if ((moves = PyObject_GetAttr(node, s_moves)) == NULL || (prior = PyObject_GetAttr(node, s_prior)) == NULL
        || (n = PyObject_GetAttr(node, s_n)) == NULL || (w = PyObject_GetAttr(node, s_w)) == NULL
        || (children = PyObject_GetAttr(node, s_children)) == NULL) {
        goto done;
    }
    if (edges_get(&e, prior, n, w, 1) < 0) {
        goto done;
    }
    have_edges = 1;
    if (e.k == 0 || !PyList_Check(children) || PyList_GET_SIZE(children) != e.k) {
        PyErr_SetString(PyExc_ValueError, "descend: an expanded node needs moves and a children list of its size");
        goto done;
    }
    const Py_ssize_t i = best_index(&e, visits, value_sum, visited_prior, params[0], params[1], params[2]);
    const long long move = move_at(moves, e.k, i);
    if (move == -1 && PyErr_Occurred()) {
        goto done;
    }
    PyObject *entry = Py_BuildValue("(On)", node, i);
    if (entry == NULL) {
        goto done;
    }
    const int appended = PyList_Append(path, entry);
    Py_DECREF(entry);
    if (appended < 0) {
        goto done;
    }
    /* Search._descend's order: visited prior on a first visit, virtual loss, the child, the move */
    double *nn = (double *)e.n.buf;
    if (nn[i] == 0 && set_double(node, s_visited_prior, visited_prior + prior_at(&e, i)) < 0) {
        goto done;
    }
    nn[i] += vl;
    if (set_double(node, s_visits, visits + vl) < 0) {
        goto done;
    }
    child = PyList_GET_ITEM(children, i);
    if (child == Py_None) {
        if ((child = PyObject_CallNoArgs(node_type)) == NULL) {
            goto done;
        }
        Py_INCREF(child);  /* PyList_SetItem takes one reference; the other is returned */
        PyList_SetItem(children, i, child);
        *created += 1;
    } else {
        Py_INCREF(child);
    }
    PyObject *move_int = PyLong_FromLongLong(move);
    PyObject *pushed = move_int == NULL ? NULL : PyObject_CallMethodOneArg(board, s_push, move_int);
    Py_XDECREF(move_int);
    if (pushed == NULL) {
        /* this level is in `path` but its move is not on the board: the caller's unwind pops once per entry,
           so the entry goes again (its virtual loss stays: a board that refuses a move ends the search) */
        PyList_SetSlice(path, PyList_GET_SIZE(path) - 1, PyList_GET_SIZE(path), NULL);
        Py_CLEAR(child);
        goto done;
    }
    Py_DECREF(pushed);
    result = child;
done:
    if (have_edges) {
        edges_release(&e);
    }
    Py_XDECREF(moves);
    Py_XDECREF(prior);
    Py_XDECREF(n);
    Py_XDECREF(w);
    Py_XDECREF(children);
    return result;
}

static PyObject *descend(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (want_args(nargs, 7, "descend") < 0) {
        return NULL;
    }
    PyObject *board = args[1], *path = args[2], *node_type = args[6];
    if (!PyList_Check(path)) {
        PyErr_SetString(PyExc_TypeError, "descend: path must be a list");
        return NULL;
    }
    double root_params[3], params[3];
    const int own_root = args[3] != Py_None;
    if ((own_root && get_params(args[3], root_params) < 0) || get_params(args[4], params) < 0) {
        return NULL;
    }
    const double vl = PyFloat_AsDouble(args[5]);
    if (vl == -1.0 && PyErr_Occurred()) {
        return NULL;
    }
    long created = 0;
    PyObject *node = args[0];
    Py_INCREF(node);
    for (int level = 0;; level++) {
        /* the walk goes on through expanded nodes (moves set) that hold no proven result (terminal None) */
        const int unproven = is_none(node, s_terminal), unexpanded = unproven < 0 ? -1 : is_none(node, s_moves);
        if (unproven < 0 || unexpanded < 0) {
            Py_DECREF(node);
            return NULL;
        }
        if (!unproven || unexpanded) {
            break;
        }
        PyObject *child = step(node, board, path, (level == 0 && own_root) ? root_params : params, vl, node_type,
                               &created);
        Py_DECREF(node);
        if (child == NULL) {
            return NULL;
        }
        node = child;
    }
    return Py_BuildValue("(Nl)", node, created);
}

static PyObject *backup(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (want_args(nargs, 4, "backup") < 0) {
        return NULL;
    }
    PyObject *path = args[0], *leaf = args[1];
    if (!PyList_Check(path)) {
        PyErr_SetString(PyExc_TypeError, "backup: path must be a list");
        return NULL;
    }
    double value = PyFloat_AsDouble(args[2]);
    const double correction = PyFloat_AsDouble(args[3]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    double visits, value_sum;
    if (get_double(leaf, s_visits, &visits) < 0 || get_double(leaf, s_value_sum, &value_sum) < 0
        || set_double(leaf, s_visits, visits + 1.0) < 0 || set_double(leaf, s_value_sum, value_sum + value) < 0) {
        return NULL;
    }
    for (Py_ssize_t j = PyList_GET_SIZE(path) - 1; j >= 0; j--) {
        PyObject *entry = PyList_GET_ITEM(path, j);
        if (!PyTuple_Check(entry) || PyTuple_GET_SIZE(entry) != 2) {
            PyErr_SetString(PyExc_TypeError, "backup: path entries must be (node, index) tuples");
            return NULL;
        }
        PyObject *node = PyTuple_GET_ITEM(entry, 0);
        const Py_ssize_t i = PyLong_AsSsize_t(PyTuple_GET_ITEM(entry, 1));
        if (i == -1 && PyErr_Occurred()) {
            return NULL;
        }
        value = 1.0 - value;
        PyObject *n = PyObject_GetAttr(node, s_n);
        PyObject *w = n == NULL ? NULL : PyObject_GetAttr(node, s_w);
        Py_buffer nv, wv;
        int ok = w != NULL && get_array(n, &nv, "d", 8, "n", PyBUF_WRITABLE) == 0;
        if (ok && get_array(w, &wv, "d", 8, "w", PyBUF_WRITABLE) < 0) {
            PyBuffer_Release(&nv);
            ok = 0;
        }
        Py_XDECREF(n);
        Py_XDECREF(w);
        if (!ok) {
            return NULL;
        }
        if (i < 0 || i >= nv.shape[0] || i >= wv.shape[0]) {
            PyBuffer_Release(&nv);
            PyBuffer_Release(&wv);
            PyErr_SetString(PyExc_IndexError, "backup: a path index is outside its node's moves");
            return NULL;
        }
        ((double *)nv.buf)[i] += correction;
        ((double *)wv.buf)[i] += value;
        PyBuffer_Release(&nv);
        PyBuffer_Release(&wv);
        if (get_double(node, s_visits, &visits) < 0 || get_double(node, s_value_sum, &value_sum) < 0
            || set_double(node, s_visits, visits + correction) < 0
            || set_double(node, s_value_sum, value_sum + value) < 0) {
            return NULL;
        }
    }
    Py_RETURN_NONE;
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

static PyMethodDef methods[] = {
    {"select", (PyCFunction)(void (*)(void))select_move, METH_FASTCALL,
     "Index of the move with the highest PUCT score (see dlzero.search.select.puct_select)."},
    {"descend", (PyCFunction)(void (*)(void))descend, METH_FASTCALL,
     "Walk down a search tree by the PUCT rule with virtual loss (see dlzero.search.mcts.Search._descend)."},
    {"backup", (PyCFunction)(void (*)(void))backup, METH_FASTCALL,
     "Add a leaf's value up its path (see dlzero.search.mcts.Search._backup)."},
    {"softmax_rows", (PyCFunction)(void (*)(void))softmax_rows, METH_FASTCALL,
     "Softmax of each row's logits at its labels (see dlzero.search.mcts.softmax_rows_into)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_puct",
    .m_doc = "dlzero's PUCT selection, descent, backup and priors, compiled.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__puct(void) {
    struct {
        PyObject **slot;
        const char *name;
    } names[] = {{&s_terminal, "terminal"}, {&s_moves, "moves"}, {&s_prior, "prior"}, {&s_n, "n"}, {&s_w, "w"},
                 {&s_children, "children"}, {&s_visits, "visits"}, {&s_value_sum, "value_sum"},
                 {&s_visited_prior, "visited_prior"}, {&s_push, "push"}};
    for (size_t j = 0; j < sizeof names / sizeof names[0]; j++) {
        if ((*names[j].slot = PyUnicode_InternFromString(names[j].name)) == NULL) {
            return NULL;
        }
    }
    return PyModule_Create(&module);
}
