/* Planes 62-99 of one encoded position, compiled (see dlzero.encoding.features for the table).
 *
 * Why C: the numpy form of these planes (Encoder.finish) costs a dozen numpy calls per batch and a
 * broadcast write, about 4-5 us a position at the search's batch of 32, as much as cshogi's own 62
 * planes; here the row is written while it is still in cache, in well under a microsecond.
 *
 * fill_row(row, hand_us, hand_them, check, repetitions, white, progress, can_declare, last_to, last_from)
 *   row: the position's float32[100 * 81] planes (C-contiguous, writeable), planes 0-61 already written
 *   by cshogi (the entering-king planes are counted from its piece planes 0-13 and 31-44);
 *   hand_us, hand_them: the seven hand counts (P L N S G B R) of the side to move and of the opponent;
 *   check, white, can_declare: truth values; repetitions: 0..3; progress: the progress plane's value;
 *   last_to, last_from: the last move's squares in the side to move's frame, -1 where there is none.
 *   Writes every value of planes 62-99. Each value is computed with the operations and the precision
 *   that Encoder.finish uses (float32, or float64 rounded to float32 where numpy promotes), so the two
 *   give the same bits; tests/test_features.py compares them on random positions.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define SQUARES 81
#define PLANES 100
#define FIRST 62

static const float HAND_SCALE[7] = {18.0f, 4.0f, 4.0f, 4.0f, 4.0f, 2.0f, 2.0f};
static const float HAND_POINTS[7] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 5.0f, 5.0f};
/* piece planes P L N S B R G K +P +L +N +S +B +R: declaration points, counted in the camp or not */
static const float TYPE_POINTS[14] = {1, 1, 1, 1, 5, 5, 1, 0, 1, 1, 1, 1, 5, 5};
#define KING_TYPE 7

static int read_hand(PyObject *seq, long out[7], const char *name) {
    PyObject *fast = PySequence_Fast(seq, "fill_row: hands must be sequences of seven counts");
    if (fast == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(fast) != 7) {
        PyErr_Format(PyExc_ValueError, "fill_row: %s must hold seven counts", name);
        Py_DECREF(fast);
        return -1;
    }
    for (int i = 0; i < 7; i++) {
        out[i] = PyLong_AsLong(PySequence_Fast_GET_ITEM(fast, i));
        if (out[i] == -1 && PyErr_Occurred()) {
            Py_DECREF(fast);
            return -1;
        }
    }
    Py_DECREF(fast);
    return 0;
}

/* Planes 82-84 (or 86-88): king in the camp, other pieces there /10 capped, declaration points / target.
 * The camp is three ranks of every file (square = file * 9 + rank): ranks 0-2 for the side to move, 6-8 for
 * the opponent, in the side to move's frame. Sums of 0/1 values, so exact in any order. */
static void camp_planes(const float *row, int first_piece_plane, int first_rank, float hand_points, long target,
                        float out[3]) {
    float king = 0.0f, count = 0.0f, points = 0.0f;
    for (int t = 0; t < 14; t++) {
        const float *plane = row + (first_piece_plane + t) * SQUARES + first_rank;
        float here = 0.0f;
        for (int file = 0; file < 9; file++) {
            here += plane[file * 9] + plane[file * 9 + 1] + plane[file * 9 + 2];
        }
        if (t == KING_TYPE) {
            king += here;
        } else {
            count += here;
        }
        points += here * TYPE_POINTS[t];
    }
    out[0] = king;
    out[1] = (count < 10.0f ? count : 10.0f) / 10.0f;
    const double share = (double)(points + hand_points) / (double)target;
    out[2] = (float)(share < 1.0 ? share : 1.0);
}

static PyObject *fill_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 10) {
        PyErr_SetString(PyExc_TypeError, "fill_row takes 10 arguments");
        return NULL;
    }
    long hand[2][7];
    if (read_hand(args[1], hand[0], "hand_us") < 0 || read_hand(args[2], hand[1], "hand_them") < 0) {
        return NULL;
    }
    const int check = PyObject_IsTrue(args[3]);
    const long reps = PyLong_AsLong(args[4]);
    const int white = PyObject_IsTrue(args[5]);
    const double progress = PyFloat_AsDouble(args[6]);
    const int declare = PyObject_IsTrue(args[7]);
    const long last_to = PyLong_AsLong(args[8]), last_from = PyLong_AsLong(args[9]);
    if (check < 0 || white < 0 || declare < 0 || PyErr_Occurred()) {
        return NULL;
    }
    if (last_to < -1 || last_to >= SQUARES || last_from < -1 || last_from >= SQUARES) {
        PyErr_SetString(PyExc_ValueError, "fill_row: a last-move square is outside the board");
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | PyBUF_WRITABLE) < 0) {
        return NULL;
    }
    if (view.itemsize != 4 || view.format == NULL || strcmp(view.format, "f") != 0
        || view.len != (Py_ssize_t)(PLANES * SQUARES * sizeof(float))) {
        PyErr_SetString(PyExc_TypeError, "fill_row: row must be a C-contiguous float32 array of 100 x 9 x 9");
        PyBuffer_Release(&view);
        return NULL;
    }
    float *row = (float *)view.buf;
    float value[PLANES - FIRST];
    memset(value, 0, sizeof value);
    float hand_points[2] = {0.0f, 0.0f};
    for (int side = 0; side < 2; side++) {
        for (int i = 0; i < 7; i++) {
            value[side * 7 + i] = (float)hand[side][i] / HAND_SCALE[i];
            hand_points[side] += (float)hand[side][i] * HAND_POINTS[i];
        }
    }
    value[76 - FIRST] = check ? 1.0f : 0.0f;
    value[77 - FIRST] = reps >= 1 ? 1.0f : 0.0f;
    value[78 - FIRST] = reps >= 2 ? 1.0f : 0.0f;
    value[79 - FIRST] = reps >= 3 ? 1.0f : 0.0f;
    value[80 - FIRST] = white ? 1.0f : 0.0f;
    value[81 - FIRST] = (float)progress;
    value[85 - FIRST] = declare ? 1.0f : 0.0f;
    /* points Black needs are 28, White 27: the side to move's target, then the opponent's */
    camp_planes(row, 0, 0, hand_points[0], white ? 27 : 28, &value[82 - FIRST]);
    camp_planes(row, 31, 6, hand_points[1], white ? 28 : 27, &value[86 - FIRST]);
    for (int p = FIRST; p < PLANES; p++) {
        float *plane = row + p * SQUARES;
        const float v = value[p - FIRST];
        for (int sq = 0; sq < SQUARES; sq++) {
            plane[sq] = v;
        }
    }
    if (last_to >= 0) {
        row[90 * SQUARES + last_to] = 1.0f;
    }
    if (last_from >= 0) {
        row[91 * SQUARES + last_from] = 1.0f;
    }
    PyBuffer_Release(&view);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fill_row", (PyCFunction)(void (*)(void))fill_row, METH_FASTCALL,
     "Write planes 62-99 of one position (see dlzero.encoding.features.Encoder)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_planes",
    .m_doc = "dlzero's scalar and entering-king input planes, compiled.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__planes(void) { return PyModule_Create(&module); }
