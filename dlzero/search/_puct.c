/* The PUCT rule of dlzero.search.select, compiled: one pass over a node's edge arrays.
 *
 * Why C: in Python, choosing a child costs 3-8 us per tree level (numpy's per-call overhead on
 * small arrays, or a Python loop), most of the tree's time under a fast network. Here a whole
 * node is scored in well under a microsecond, so the search needs no prefix tricks.
 *
 * select(prior, n, w, parent_visits, parent_value_sum, visited_prior, c_init, c_base, fpu_reduction)
 *   prior: float32[k] (or float64), n and w: float64[k], all C-contiguous; returns the index of the best score,
 *   the lowest index among equals. Every score is computed with the same IEEE operations in the
 *   same order as select.puct_scores (build with -ffp-contract=off), so the choice is bit for bit
 *   the numpy one; tests/test_select.py checks it against numpy on random and tied arrays.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <string.h>

static int get_array(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize, const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != itemsize || view->format == NULL || strcmp(view->format, format) != 0) {
        PyErr_Format(PyExc_TypeError, "select: %s must be a one-dimensional C-contiguous array of '%s'", name, format);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

static PyObject *select_move(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 9) {
        PyErr_SetString(PyExc_TypeError, "select takes 9 arguments");
        return NULL;
    }
    double scalars[6];
    for (int j = 0; j < 6; j++) {
        scalars[j] = PyFloat_AsDouble(args[3 + j]);
        if (scalars[j] == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
    }
    const double parent_visits = scalars[0], parent_value_sum = scalars[1], visited_prior = scalars[2];
    const double c_init = scalars[3], c_base = scalars[4], fpu_reduction = scalars[5];

    Py_buffer pv, nv, wv;
    if (PyObject_GetBuffer(args[0], &pv, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) {
        return NULL;
    }
    const int prior_f32 = pv.format != NULL && strcmp(pv.format, "f") == 0 && pv.itemsize == 4;
    const int prior_f64 = pv.format != NULL && strcmp(pv.format, "d") == 0 && pv.itemsize == 8;
    if (pv.ndim != 1 || !(prior_f32 || prior_f64)) {
        PyErr_SetString(PyExc_TypeError, "select: prior must be a one-dimensional C-contiguous float32 or float64 array");
        PyBuffer_Release(&pv);
        return NULL;
    }
    if (get_array(args[1], &nv, "d", 8, "n") < 0) {
        PyBuffer_Release(&pv);
        return NULL;
    }
    if (get_array(args[2], &wv, "d", 8, "w") < 0) {
        PyBuffer_Release(&pv);
        PyBuffer_Release(&nv);
        return NULL;
    }
    Py_ssize_t k = pv.shape[0];
    if (nv.shape[0] != k || wv.shape[0] != k) {
        PyErr_SetString(PyExc_ValueError, "select: prior, n and w must have the same length");
        PyBuffer_Release(&pv);
        PyBuffer_Release(&nv);
        PyBuffer_Release(&wv);
        return NULL;
    }
    const float *prior32 = (const float *)pv.buf;
    const double *prior64 = (const double *)pv.buf;
    const double *n = (const double *)nv.buf, *w = (const double *)wv.buf;

    /* select.exploration_constant and select.first_play_urgency, operation for operation */
    const double c = c_init + log((parent_visits + c_base + 1.0) / c_base);
    const double cs = c * (parent_visits > 0 ? sqrt(parent_visits) : 1.0);
    const double parent_q = parent_visits > 0 ? parent_value_sum / parent_visits : 0.5;
    const double fpu_raw = parent_q - fpu_reduction * sqrt(visited_prior);
    const double fpu = fpu_raw > 0.0 ? fpu_raw : 0.0;

    Py_ssize_t best_i = -1;
    double best = -INFINITY;
    for (Py_ssize_t i = 0; i < k; i++) {
        const double ni = n[i];
        const double q = ni > 0 ? w[i] / ni : fpu;
        double u = (prior_f32 ? (double)prior32[i] : prior64[i]) * cs;
        u /= 1.0 + ni;
        const double score = q + u;
        if (score > best || best_i < 0) {
            best = score;
            best_i = i;
        }
    }
    PyBuffer_Release(&pv);
    PyBuffer_Release(&nv);
    PyBuffer_Release(&wv);
    return PyLong_FromSsize_t(best_i);
}

static PyMethodDef methods[] = {
    {"select", (PyCFunction)(void (*)(void))select_move, METH_FASTCALL,
     "Index of the move with the highest PUCT score (see dlzero.search.select.puct_select)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_puct",
    .m_doc = "dlzero's PUCT selection, compiled.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__puct(void) { return PyModule_Create(&module); }
