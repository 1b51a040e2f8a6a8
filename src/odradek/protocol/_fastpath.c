/*
 * The produce path's per-batch checks, in C (protocol.records and storage.log call it).
 *
 * A 16 KB batch costs the kernel about 10 us to write; in Python the checks Kafka's
 * LogValidator makes on it (header fields, CRC32C, the client-only rules, every record's
 * timestampDelta while a timestamp window is set) cost about half as much again. Here
 * they cost under 1 us, half of it the CRC.
 *
 * Only the regular case is decided here. Anything else (a damaged or oversized batch, a
 * control batch, a batch the producer marked LogAppendTime, a compressed batch whose
 * records must be read, a timestamp out of the window, a maxTimestamp to correct, several
 * batches of an idempotent producer) returns None, and the caller runs the Python code,
 * which names the error or does the rarer work. So the two cannot disagree on an error,
 * and the tests check that they agree on every result these functions return.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The v2 batch header (the record-batch specification), big-endian. */
enum {
    BASE_OFFSET = 0, BATCH_LENGTH = 8, PARTITION_LEADER_EPOCH = 12, MAGIC = 16, CRC = 17,
    ATTRIBUTES = 21, LAST_OFFSET_DELTA = 23, BASE_TIMESTAMP = 27, MAX_TIMESTAMP = 35,
    PRODUCER_ID = 43, PRODUCER_EPOCH = 51, BASE_SEQUENCE = 53, RECORDS_COUNT = 57,
    HEADER_SIZE = 61, LOG_OVERHEAD = 12, PREFIX = MAGIC,
};
#define COMPRESSION_MASK 0x07
#define TIMESTAMP_TYPE_MASK 0x08
#define CONTROL_MASK 0x20

static PyObject *crc32c_func; /* fastcrc.crc32.iscsi, the project's CRC-32C (see pyproject.toml) */

static uint64_t be64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = (v << 8) | p[i];
    return v;
}

static uint32_t be32(const unsigned char *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static void put_be64(unsigned char *p, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

static void put_be32(unsigned char *p, uint32_t v)
{
    for (int i = 3; i >= 0; i--, v >>= 8)
        p[i] = (unsigned char)v;
}

/* An unsigned varint at *pos; 0 when it ends inside the buffer and fits 64 bits. */
static int read_uvarint(const unsigned char *buf, Py_ssize_t size, Py_ssize_t *pos, uint64_t *value)
{
    uint64_t result = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (*pos >= size)
            return -1;
        unsigned char byte = buf[(*pos)++];
        uint64_t bits = (uint64_t)(byte & 0x7F);
        if (shift == 63 && bits > 1)
            return -1; /* more than 64 bits: Python's int would hold it, uint64 cannot */
        result |= bits << shift;
        if (!(byte & 0x80)) {
            *value = result;
            return 0;
        }
    }
    return -1;
}

/* Smallest and largest timestampDelta of count records filling buf exactly; -1 when irregular. */
static int delta_range(const unsigned char *buf, Py_ssize_t size, Py_ssize_t count, int64_t *low, int64_t *high)
{
    Py_ssize_t pos = 0;
    *low = INT64_MAX;
    *high = INT64_MIN;
    for (Py_ssize_t i = 0; i < count; i++) {
        uint64_t length, zigzag;
        if (read_uvarint(buf, size, &pos, &length) || (length & 1))
            return -1;
        Py_ssize_t at = pos + 1; /* timestampDelta follows the attributes byte */
        if (read_uvarint(buf, size, &at, &zigzag))
            return -1;
        int64_t delta = (int64_t)(zigzag >> 1) ^ -(int64_t)(zigzag & 1);
        if (delta < *low)
            *low = delta;
        if (delta > *high)
            *high = delta;
        if ((length >> 1) > (uint64_t)(size - pos))
            return -1;
        pos += (Py_ssize_t)(length >> 1);
    }
    return pos == size ? 0 : -1;
}

static PyObject *timestamp_delta_range(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_buffer view;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "timestamp_delta_range(payload, count)");
        return NULL;
    }
    Py_ssize_t count = PyLong_AsSsize_t(args[1]);
    if (count == -1 && PyErr_Occurred())
        return NULL;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    int64_t low, high;
    int irregular = delta_range(view.buf, view.len, count, &low, &high);
    PyBuffer_Release(&view);
    if (irregular)
        Py_RETURN_NONE;
    return Py_BuildValue("(LL)", (long long)low, (long long)high);
}

/* CRC-32C of len bytes at p; -1 with an exception set on failure. */
static int64_t crc32c_of(const unsigned char *p, Py_ssize_t len)
{
    PyObject *view = PyMemoryView_FromMemory((char *)p, len, PyBUF_READ);
    if (view == NULL)
        return -1;
    PyObject *value = PyObject_CallOneArg(crc32c_func, view);
    Py_DECREF(view);
    if (value == NULL)
        return -1;
    unsigned long crc = PyLong_AsUnsignedLong(value);
    Py_DECREF(value);
    if (crc == (unsigned long)-1 && PyErr_Occurred())
        return -1;
    return (int64_t)crc;
}

/*
 * A read-only buffer over part of another object's memory that keeps that object alive.
 * What writev needs of a batch's tail: slicing a memoryview costs about 0.2 us, a fifth
 * of the rest of the checks; this costs an allocation.
 */
typedef struct {
    PyObject_HEAD
    Py_buffer owner; /* an export of the records: they cannot be released under the slice */
    char *buf;
    Py_ssize_t len;
} Slice;

static int slice_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    Slice *slice = (Slice *)self;
    return PyBuffer_FillInfo(view, self, slice->buf, slice->len, 1, flags);
}

static void slice_dealloc(PyObject *self)
{
    PyBuffer_Release(&((Slice *)self)->owner);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs slice_as_buffer = {slice_getbuffer, NULL};

static PyTypeObject SliceType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "odradek.protocol._fastpath.Slice",
    .tp_basicsize = sizeof(Slice),
    .tp_dealloc = slice_dealloc,
    .tp_as_buffer = &slice_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Read-only bytes of a batch, kept alive with the records they are part of.",
};

/* A Slice of len bytes at offset of records. */
static PyObject *new_slice(PyObject *records, Py_ssize_t offset, Py_ssize_t len)
{
    Slice *slice = PyObject_New(Slice, &SliceType);
    if (slice == NULL)
        return NULL;
    if (PyObject_GetBuffer(records, &slice->owner, PyBUF_SIMPLE) < 0) {
        PyObject_Free(slice);
        return NULL;
    }
    slice->buf = (char *)slice->owner.buf + offset;
    slice->len = len;
    return (PyObject *)slice;
}

/* A tuple of n ints (Py_BuildValue parses its format on every call; this is the hot path). */
static PyObject *int_tuple(Py_ssize_t n, const long long *values)
{
    PyObject *tuple = PyTuple_New(n);
    for (Py_ssize_t i = 0; tuple != NULL && i < n; i++) {
        PyObject *item = PyLong_FromLongLong(values[i]);
        if (item == NULL)
            Py_CLEAR(tuple);
        else
            PyTuple_SET_ITEM(tuple, i, item);
    }
    return tuple;
}

/* Append item (a new reference, NULL on error) to list; -1 on error. */
static int append_new(PyObject *list, PyObject *item)
{
    if (item == NULL)
        return -1;
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

/*
 * scan_for_append(records, next_offset, leader_epoch, max_message_bytes, now_ms, before_max_ms, after_max_ms)
 *
 * The leader's checks of a client's records (storage.log.Log.append's loop for
 * AppendOrigin.CLIENT on a topic without compaction, recompression or LogAppendTime),
 * and what the append then needs: (pieces, batches, next_offset, max_timestamp,
 * record_count, producer_batch). pieces are, per batch, its new 16-byte prefix (baseOffset,
 * batchLength, partitionLeaderEpoch) and a Slice of the rest, for one writev; batches are
 * (position, size, base offset, last offset, max timestamp); producer_batch is
 * (producer id, epoch, first sequence, last sequence, base offset, last offset, max
 * timestamp) of a lone idempotent batch, else None. None when anything is irregular.
 * The timestamp window is [now_ms - before_max_ms, now_ms + after_max_ms] (clamped to
 * int64, which changes no comparison), not checked when both are Long.MAX_VALUE.
 */
static PyObject *scan_for_append(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 7) {
        PyErr_SetString(PyExc_TypeError, "scan_for_append(records, next_offset, leader_epoch, "
                                         "max_message_bytes, now_ms, before_max_ms, after_max_ms)");
        return NULL;
    }
    long long next_offset = PyLong_AsLongLong(args[1]);
    long leader_epoch = PyLong_AsLong(args[2]);
    long long max_message_bytes = PyLong_AsLongLong(args[3]);
    long long now_ms = PyLong_AsLongLong(args[4]);
    long long before = PyLong_AsLongLong(args[5]);
    long long after = PyLong_AsLongLong(args[6]);
    if (PyErr_Occurred())
        return NULL;
    int check_timestamps = before != INT64_MAX || after != INT64_MAX;
    long long low, high;
    if (__builtin_sub_overflow(now_ms, before, &low))
        low = INT64_MIN;
    if (__builtin_add_overflow(now_ms, after, &high))
        high = INT64_MAX;
    /* The pieces are views of the records: of the caller's memoryview, or of a new one. */
    PyObject *records = PyMemoryView_Check(args[0]) ? Py_NewRef(args[0]) : PyMemoryView_FromObject(args[0]);
    if (records == NULL)
        return NULL;
    const Py_buffer *view = PyMemoryView_GET_BUFFER(records);
    PyObject *pieces = NULL, *batches = NULL, *producer_batch = Py_NewRef(Py_None), *result = NULL;
    if (!PyBuffer_IsContiguous(view, 'C') || view->itemsize != 1) {
        PyErr_SetString(PyExc_TypeError, "scan_for_append needs contiguous bytes");
        goto done;
    }
    const unsigned char *buf = view->buf;
    Py_ssize_t end = view->len, position = 0;
    long long max_ts = -1, record_count = 0;
    if (end == 0)
        goto irregular;
    if ((pieces = PyList_New(0)) == NULL || (batches = PyList_New(0)) == NULL)
        goto done;
    while (position < end) {
        const unsigned char *h = buf + position;
        if (end - position < HEADER_SIZE)
            goto irregular;
        int32_t length = (int32_t)be32(h + BATCH_LENGTH);
        int32_t delta = (int32_t)be32(h + LAST_OFFSET_DELTA);
        int32_t count = (int32_t)be32(h + RECORDS_COUNT);
        int16_t attributes = (int16_t)((h[ATTRIBUTES] << 8) | h[ATTRIBUTES + 1]);
        int64_t base_ts = (int64_t)be64(h + BASE_TIMESTAMP), batch_ts = (int64_t)be64(h + MAX_TIMESTAMP);
        int64_t pid = (int64_t)be64(h + PRODUCER_ID);
        int32_t first_seq = (int32_t)be32(h + BASE_SEQUENCE);
        Py_ssize_t size = (Py_ssize_t)LOG_OVERHEAD + length;
        if (length < HEADER_SIZE - LOG_OVERHEAD || size > end - position || h[MAGIC] != 2
            || delta < 0 || count != (int64_t)delta + 1 || size > max_message_bytes
            || (attributes & (CONTROL_MASK | TIMESTAMP_TYPE_MASK)) || (pid >= 0 && first_seq < 0)
            || (pid >= 0 && size != end) /* several idempotent batches: checked together in Python */
            || next_offset > INT64_MAX - delta)
            goto irregular;
        int64_t crc = crc32c_of(h + ATTRIBUTES, size - ATTRIBUTES);
        if (crc < 0)
            goto done;
        if ((uint32_t)crc != be32(h + CRC))
            goto irregular;
        if (check_timestamps) {
            int64_t lo, hi, first_ts, last_ts;
            if ((attributes & COMPRESSION_MASK)
                || delta_range(h + HEADER_SIZE, size - HEADER_SIZE, count, &lo, &hi)
                || __builtin_add_overflow(base_ts, lo, &first_ts) || __builtin_add_overflow(base_ts, hi, &last_ts)
                || first_ts < low || last_ts > high || last_ts != batch_ts)
                goto irregular;
        }
        unsigned char prefix[PREFIX];
        put_be64(prefix + BASE_OFFSET, (uint64_t)next_offset);
        put_be32(prefix + BATCH_LENGTH, (uint32_t)length);
        put_be32(prefix + PARTITION_LEADER_EPOCH, (uint32_t)leader_epoch);
        long long last = next_offset + delta;
        if (append_new(pieces, PyBytes_FromStringAndSize((const char *)prefix, PREFIX))
            || append_new(pieces, new_slice(records, position + PREFIX, size - PREFIX))
            || append_new(batches, int_tuple(5, (long long[]){position, size, next_offset, last, batch_ts})))
            goto done;
        if (pid >= 0) {
            Py_DECREF(producer_batch);
            int16_t epoch = (int16_t)((h[PRODUCER_EPOCH] << 8) | h[PRODUCER_EPOCH + 1]);
            int last_seq = (int)(((int64_t)first_seq + delta) % 2147483648LL);
            producer_batch = int_tuple(7, (long long[]){pid, epoch, first_seq, last_seq, next_offset, last, batch_ts});
            if (producer_batch == NULL)
                goto done;
        }
        if (batch_ts > max_ts)
            max_ts = batch_ts;
        record_count += count;
        next_offset = last + 1;
        position += size;
    }
    PyObject *counts = int_tuple(3, (long long[]){next_offset, max_ts, record_count});
    if (counts != NULL)
        result = PyTuple_Pack(6, pieces, batches, PyTuple_GET_ITEM(counts, 0), PyTuple_GET_ITEM(counts, 1),
                              PyTuple_GET_ITEM(counts, 2), producer_batch);
    Py_XDECREF(counts);
    goto done;
irregular:
    result = Py_NewRef(Py_None);
done:
    Py_DECREF(records);
    Py_XDECREF(pieces);
    Py_XDECREF(batches);
    Py_XDECREF(producer_batch);
    return result;
}

static PyMethodDef methods[] = {
    {"timestamp_delta_range", (PyCFunction)(void (*)(void))timestamp_delta_range, METH_FASTCALL,
     "(smallest, largest) timestampDelta of count records filling payload exactly, or None "
     "when the payload is irregular in any way (the Python walk then names the error)."},
    {"scan_for_append", (PyCFunction)(void (*)(void))scan_for_append, METH_FASTCALL,
     "The leader's checks of a client's records and the pieces of their append, or None when "
     "anything is irregular (Log.append's Python loop then decides)."},
    {NULL, NULL, 0, NULL},
};

static int exec_module(PyObject *module)
{
    if (PyType_Ready(&SliceType) < 0)
        return -1;
    PyObject *crc32 = PyImport_ImportModule("fastcrc.crc32");
    if (crc32 == NULL)
        return -1;
    crc32c_func = PyObject_GetAttrString(crc32, "iscsi");
    Py_DECREF(crc32);
    return crc32c_func == NULL ? -1 : 0;
}

static PyModuleDef_Slot slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};

static struct PyModuleDef fastpath = {PyModuleDef_HEAD_INIT, "_fastpath", NULL, 0, methods, slots};

PyMODINIT_FUNC PyInit__fastpath(void)
{
    return PyModuleDef_Init(&fastpath);
}
