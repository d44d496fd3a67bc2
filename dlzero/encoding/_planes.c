/* Planes 62-99 of one encoded position, compiled (see dlzero.encoding.features for the table).
 *
 * Why C: the numpy form of these planes (Encoder.finish) costs a dozen numpy calls per batch and a
 * broadcast write, about 4-5 us a position at the search's batch of 32, as much as cshogi's own 62
 * planes; here the row is written while it is still in cache, in well under a microsecond. The board's
 * scalars (side to move, hands, ply, last move, entering king) are read here too: read in Python they
 * cost ~2 us a leaf, most of what the encoder added to cshogi's planes on the search's path.
 *
 * fill_board_row(batch, row, board, f2, repetitions)
 *   batch: the float32 (B, 100, 9, 9) buffer (C-contiguous, writeable); row: the position's row in it, whose
 *   planes 0-61 cshogi has written (the entering-king planes are counted from its piece planes 0-13 and 31-44);
 *   board: the cshogi.Board of the position (turn, pieces_in_hand, move_number, peek(), is_nyugyoku() are read);
 *   f2: the float32 features2 cshogi wrote beside planes 0-61 (its plane 56 says check); repetitions: 0..3.
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
#define PROGRESS_PLIES 512.0 /* features.PROGRESS_PLIES */
#define CHECK_PLANE 56 /* features2's check plane */

static const float HAND_SCALE[7] = {18.0f, 4.0f, 4.0f, 4.0f, 4.0f, 2.0f, 2.0f};
static const float HAND_POINTS[7] = {1.0f, 1.0f, 1.0f, 1.0f, 1.0f, 5.0f, 5.0f};
/* piece planes P L N S B R G K +P +L +N +S +B +R: declaration points, counted in the camp or not */
static const float TYPE_POINTS[14] = {1, 1, 1, 1, 5, 5, 1, 0, 1, 1, 1, 1, 5, 5};
#define KING_TYPE 7

static int read_hand(PyObject *seq, long out[7], const char *name) {
    PyObject *fast = PySequence_Fast(seq, "fill_board_row: hands must be sequences of seven counts");
    if (fast == NULL) {
        return -1;
    }
    if (PySequence_Fast_GET_SIZE(fast) != 7) {
        PyErr_Format(PyExc_ValueError, "fill_board_row: %s must hold seven counts", name);
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

/* Planes 62-99 of `row` from the position's scalars (planes 0-61 already written). */
static void write_planes(float *row, long hand[2][7], int check, long reps, int white, double progress, int declare,
                         long last_to, long last_from) {
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
}

/* A float32 C-contiguous buffer of `obj` (writeable when asked) shaped (n, planes, 9, 9) with n >= 1 and, when
 * `planes` is 0, (planes, 9, 9) with at least `least` planes; or -1 with a TypeError naming it. */
static int float_buffer(PyObject *obj, Py_buffer *view, int writable, Py_ssize_t planes, Py_ssize_t least,
                        const char *what) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        return -1;
    }
    int ok = view->itemsize == 4 && view->format != NULL && strcmp(view->format, "f") == 0;
    if (ok && planes) {
        ok = view->ndim == 4 && view->shape[0] >= 1 && view->shape[1] == planes && view->shape[2] == 9
             && view->shape[3] == 9;
    } else if (ok) {
        ok = view->ndim == 3 && view->shape[0] >= least && view->shape[1] == 9 && view->shape[2] == 9;
    }
    if (!ok) {
        PyErr_Format(PyExc_TypeError, "fill_board_row: %s", what);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* An attribute of the board (called when `call`), as a C long: 0, or -1 with an error set. */
static int board_long(PyObject *board, PyObject *name, int call, long *out) {
    PyObject *v = call ? PyObject_CallMethodNoArgs(board, name) : PyObject_GetAttr(board, name);
    if (v == NULL) {
        return -1;
    }
    *out = PyLong_AsLong(v);
    Py_DECREF(v);
    return *out == -1 && PyErr_Occurred() ? -1 : 0;
}

static PyObject *s_turn, *s_hands, *s_move_number, *s_peek, *s_nyugyoku;

static PyObject *fill_board_row(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "fill_board_row takes 5 arguments");
        return NULL;
    }
    const Py_ssize_t row_index = PyNumber_AsSsize_t(args[1], PyExc_IndexError);
    const long reps = PyLong_AsLong(args[4]);
    if (PyErr_Occurred()) {
        return NULL;
    }
    if (reps < 0 || reps > 3) {
        PyErr_Format(PyExc_ValueError, "fill_board_row: repetitions must be 0..3, not %ld", reps);
        return NULL;
    }
    PyObject *board = args[2];
    long turn, move_number, last, declare;
    if (board_long(board, s_turn, 0, &turn) < 0 || board_long(board, s_move_number, 0, &move_number) < 0
        || board_long(board, s_peek, 1, &last) < 0) {
        return NULL;
    }
    PyObject *nyugyoku = PyObject_CallMethodNoArgs(board, s_nyugyoku);
    if (nyugyoku == NULL) {
        return NULL;
    }
    declare = PyObject_IsTrue(nyugyoku);
    Py_DECREF(nyugyoku);
    PyObject *hands = declare < 0 ? NULL : PyObject_GetAttr(board, s_hands);
    if (hands == NULL) {
        return NULL;
    }
    long hand[2][7];
    const int white = turn != 0;
    PyObject *ours = PySequence_GetItem(hands, white), *theirs = ours == NULL ? NULL : PySequence_GetItem(hands, !white);
    const int hands_ok = theirs != NULL && read_hand(ours, hand[0], "hand_us") == 0
                         && read_hand(theirs, hand[1], "hand_them") == 0;
    Py_XDECREF(ours);
    Py_XDECREF(theirs);
    Py_DECREF(hands);
    if (!hands_ok) {
        return NULL;
    }
    /* the last move's squares in the side to move's frame (cshogi's move: to in bits 0-6, from in 7-13, a drop's
       from is 81 or more), -1 where there is none */
    long last_to = -1, last_from = -1;
    if (last) {
        const long to = last & 0x7f, from = (last >> 7) & 0x7f;
        if (to >= SQUARES) {
            PyErr_Format(PyExc_ValueError, "fill_board_row: the last move %ld lands outside the board", last);
            return NULL;
        }
        last_to = white ? 80 - to : to;
        if (from < SQUARES) {
            last_from = white ? 80 - from : from;
        }
    }
    double progress = (double)(move_number - 1) / PROGRESS_PLIES;
    if (progress > 1.0) {
        progress = 1.0;
    }
    Py_buffer bv, fv;
    if (float_buffer(args[0], &bv, 1, PLANES, 0, "batch must be a writeable C-contiguous float32 array of shape "
                     "(B, 100, 9, 9)") < 0) {
        return NULL;
    }
    if (float_buffer(args[3], &fv, 0, 0, CHECK_PLANE + 1, "f2 must be cshogi's float32 features2 (57 x 9 x 9)") < 0) {
        PyBuffer_Release(&bv);
        return NULL;
    }
    const Py_ssize_t rows = bv.shape[0];
    PyObject *result = NULL;
    if (row_index < 0 || row_index >= rows) {
        PyErr_Format(PyExc_IndexError, "fill_board_row: row %zd is outside the batch of %zd", row_index, rows);
    } else {
        const int check = ((const float *)fv.buf)[CHECK_PLANE * SQUARES] > 0.0f;
        write_planes((float *)bv.buf + row_index * PLANES * SQUARES, hand, check, reps, white, progress, (int)declare,
                     last_to, last_from);
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&fv);
    PyBuffer_Release(&bv);
    return result;
}

/* A one-dimensional C-contiguous array argument of `itemsize`-byte items in format `format` (or '<' + it),
 * writeable when asked: 0, or -1 with a TypeError naming it. */
static int get_vector(PyObject *obj, Py_buffer *view, const char *format, Py_ssize_t itemsize, int writable,
                      const char *name) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0)) < 0) {
        return -1;
    }
    if (view->ndim != 1 || view->itemsize != itemsize || view->format == NULL
        || (strcmp(view->format, format) != 0 && !(view->format[0] == '<' && strcmp(view->format + 1, format) == 0))) {
        PyErr_Format(PyExc_TypeError, "legal_moves_and_labels: %s", name);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

/* legal_moves_and_labels(moves, label_row, moves_out, labels_out)
 *   moves: an iterable of cshogi move ints (board.legal_moves), as many as moves_out holds; label_row: the int32
 *   table of labels by a move's low 15 bits for the side to move (dlzero.encoding.labels._LABEL_ROWS[turn],
 *   32768 entries); moves_out (int64) and labels_out (int32): the arrays to fill. Why C: numpy's fromiter, mask
 *   and gather on a few dozen moves cost ~2.9 us a new leaf, this and the two np.empty ~0.8. */
static PyObject *legal_moves_and_labels(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    (void)self;
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "legal_moves_and_labels takes 4 arguments");
        return NULL;
    }
    Py_buffer tv, mv, lv;
    if (get_vector(args[1], &tv, "i", 4, 0, "label_row must be a C-contiguous int32 array of 32768 labels") < 0) {
        return NULL;
    }
    if (tv.len != (Py_ssize_t)(32768 * sizeof(int32_t))) {
        PyErr_SetString(PyExc_TypeError, "legal_moves_and_labels: label_row must be a C-contiguous int32 array of "
                        "32768 labels");
        PyBuffer_Release(&tv);
        return NULL;
    }
    if (get_vector(args[2], &mv, "l", 8, 1, "moves_out must be a writeable C-contiguous int64 array") < 0) {
        PyBuffer_Release(&tv);
        return NULL;
    }
    if (get_vector(args[3], &lv, "i", 4, 1, "labels_out must be a writeable C-contiguous int32 array") < 0) {
        PyBuffer_Release(&mv);
        PyBuffer_Release(&tv);
        return NULL;
    }
    const int32_t *table = (const int32_t *)tv.buf;
    int64_t *moves = (int64_t *)mv.buf;
    int32_t *labels = (int32_t *)lv.buf;
    const Py_ssize_t want = mv.shape[0];
    Py_ssize_t n = 0;
    PyObject *result = NULL, *item, *it = NULL;
    if (lv.shape[0] != want) {
        PyErr_Format(PyExc_ValueError, "legal_moves_and_labels: %zd moves but %zd labels out", want, lv.shape[0]);
        goto done;
    }
    if ((it = PyObject_GetIter(args[0])) == NULL) {
        goto done;
    }
    while ((item = PyIter_Next(it)) != NULL) {
        const long move = PyLong_AsLong(item);
        Py_DECREF(item);
        if (move == -1 && PyErr_Occurred()) {
            break;
        }
        if (n == want) {
            PyErr_Format(PyExc_ValueError, "legal_moves_and_labels: more moves than the %zd of moves_out", want);
            break;
        }
        moves[n] = move;
        labels[n] = table[move & 0x7FFF];
        n++;
    }
    Py_DECREF(it);
    if (!PyErr_Occurred()) {
        if (n != want) {
            PyErr_Format(PyExc_ValueError, "legal_moves_and_labels: %zd moves, not the %zd of moves_out", n, want);
        } else {
            result = Py_NewRef(Py_None);
        }
    }
done:
    PyBuffer_Release(&lv);
    PyBuffer_Release(&mv);
    PyBuffer_Release(&tv);
    return result;
}

static PyMethodDef methods[] = {
    {"legal_moves_and_labels", (PyCFunction)(void (*)(void))legal_moves_and_labels, METH_FASTCALL,
     "A position's legal moves and their policy labels (see dlzero.encoding.labels.legal_moves_and_labels)."},
    {"fill_board_row", (PyCFunction)(void (*)(void))fill_board_row, METH_FASTCALL,
     "Write planes 62-99 of one position of a batch (see dlzero.encoding.features.Encoder)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_planes",
    .m_doc = "dlzero's scalar and entering-king input planes, and the legal moves' labels, compiled.",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__planes(void) {
    if ((s_turn = PyUnicode_InternFromString("turn")) == NULL
        || (s_hands = PyUnicode_InternFromString("pieces_in_hand")) == NULL
        || (s_move_number = PyUnicode_InternFromString("move_number")) == NULL
        || (s_peek = PyUnicode_InternFromString("peek")) == NULL
        || (s_nyugyoku = PyUnicode_InternFromString("is_nyugyoku")) == NULL) {
        return NULL;
    }
    return PyModule_Create(&module);
}
