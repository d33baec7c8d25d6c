/* perfkit's compiled hot path: @timed's call, a section's enter and exit, section()'s cache lookup,
 * timed_iter's next.
 *
 * Optional. perfkit builds it at install time where a C compiler is present and runs the same
 * code in pure Python where not (or with PERFKIT_PURE=1); the test suite runs against both.
 *
 * Each entry point here does only the common case, and does it as the Python code does: the
 * switch is on, no profiler window is open, the registry is a Registry, the context has its cell,
 * and the node for (open node, name) is already interned. Anything else (the first call in a
 * thread, a new call path, a profiler window, a section left open by a suspended generator) is
 * handed whole, before any side effect, to the pure-Python code of the same entry point, which
 * this module is given by configure(). So there is one implementation of every rare path, and
 * the compiled one differs from it only in speed.
 *
 * Records are the Python path's: node (or ~node for a call that raised), start, end. They are kept
 * as packed int64 in the registry's C base (no Python int made, none converted at the drain),
 * with a note, whenever it has changed, of how many records the Python path's list held; the drain
 * takes both in one call and puts every packed record back among the listed ones where it was
 * made. So the records reach the rings in the order they were made, as on the Python path alone.
 * The drain is called past DRAIN_AT pending ints, after a call that raised too.
 *
 * What this file shares with the Python code of the registry (the attributes of RegistryCore, the
 * record layout, the marks, the method called to drain, DRAIN_AT, who owns the lock) is written
 * once, in perfkit/_buffer.py; tests/test_buffer.py checks the names here against it.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <time.h>

/* What configure() hands over: perfkit's own objects, read on every call. */
static PyObject *g_switch;        /* perfkit._state.SWITCH, a Switch */
static PyObject *g_cell_var;      /* ContextVar of the cell: [open node, owner, *section frames] */
static PyObject *g_registry_var;  /* ContextVar of the current registry */
static PyObject *g_running_tasks; /* asyncio's table of running tasks (a dict), or anything else: always ask */
static PyObject *g_perf_counter;  /* time.perf_counter_ns: a registry using it is read here directly */
static PyObject *g_section_enter; /* the pure-Python Section.__enter__ and __exit__ */
static PyObject *g_section_exit;
static PyObject *g_iter_next;     /* the pure-Python TimedIterator.__next__ */
static PyObject *g_iter_end;      /* records a source's last next() (StopIteration): _record_end */
static Py_ssize_t g_drain_at = -1;
static int g_ready; /* every field above is set: until then every call takes the Python path */
static PyObject *g_str_drain;

/* ---------------------------------------------------------------- errors */

/* An exception raised while another was being handled (the clock or the drain failing after the
 * timed code raised): raise the new one with the old as its __context__, as Python would. Takes
 * the old one's references. */
static void raise_in_context(PyObject *type, PyObject *value, PyObject *tb) {
    PyObject *new_type, *new_value, *new_tb;
    PyErr_Fetch(&new_type, &new_value, &new_tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyErr_NormalizeException(&new_type, &new_value, &new_tb);
    if (value != NULL && tb != NULL) PyException_SetTraceback(value, tb);
    if (new_value != NULL && value != NULL && new_value != value) {
        PyException_SetContext(new_value, value); /* steals value */
        value = NULL;
    }
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    PyErr_Restore(new_type, new_value, new_tb);
}

static int refuse_delete(PyObject *value, const char *name) {
    if (value == NULL) {
        PyErr_Format(PyExc_AttributeError, "%s cannot be deleted", name);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------- Switch */

typedef struct {
    PyObject_HEAD
    char on;
    PyObject *tracer; /* NULL or None: no profiler window */
} SwitchObject;

static PyObject *switch_get_on(SwitchObject *self, void *Py_UNUSED(closure)) {
    return PyBool_FromLong(self->on);
}

static int switch_set_on(SwitchObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    if (refuse_delete(value, "on") < 0) return -1;
    int on = PyObject_IsTrue(value);
    if (on < 0) return -1;
    self->on = (char)on;
    return 0;
}

static PyObject *switch_get_tracer(SwitchObject *self, void *Py_UNUSED(closure)) {
    PyObject *tracer = self->tracer ? self->tracer : Py_None;
    Py_INCREF(tracer);
    return tracer;
}

static int switch_set_tracer(SwitchObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    if (refuse_delete(value, "tracer") < 0) return -1;
    Py_INCREF(value);
    Py_XSETREF(self->tracer, value);
    return 0;
}

static PyGetSetDef switch_getset[] = {
    {"on", (getter)switch_get_on, (setter)switch_set_on, "Whether entry points record.", NULL},
    {"tracer", (getter)switch_get_tracer, (setter)switch_set_tracer, "The profiler window's tracer, or None.",
     NULL},
    {NULL},
};

static int switch_init(SwitchObject *self, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"on", NULL};
    int on = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|p", kwlist, &on)) return -1;
    self->on = (char)on;
    return 0;
}

static int switch_traverse(SwitchObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->tracer);
    return 0;
}

static int switch_clear(SwitchObject *self) {
    Py_CLEAR(self->tracer);
    return 0;
}

static void switch_dealloc(SwitchObject *self) {
    PyObject_GC_UnTrack(self);
    switch_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject SwitchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "perfkit._speedups.Switch",
    .tp_doc = "The process-wide on/off switch and profiler tracer, read by the compiled entry points.",
    .tp_basicsize = sizeof(SwitchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)switch_init,
    .tp_traverse = (traverseproc)switch_traverse,
    .tp_clear = (inquiry)switch_clear,
    .tp_dealloc = (destructor)switch_dealloc,
    .tp_getset = switch_getset,
};

static inline int switch_on(void) {
    return ((SwitchObject *)g_switch)->on;
}

/* No profiler window is open (its tracer would make each record a named range of the trace too). */
static inline int no_tracer(void) {
    PyObject *t = ((SwitchObject *)g_switch)->tracer;
    return t == NULL || t == Py_None;
}

/* ---------------------------------------------------------------- RegistryCore */

/* The fields of a Registry that every record touches (the contract: perfkit/_buffer.py). `_buf` is always a list and `clock` always
 * a callable once set: neither can be deleted, so a record never finds them missing. */
typedef struct {
    PyObject_HEAD
    PyObject *buf;   /* pending records of the Python path: node, start, end, ... */
    PyObject *clock; /* returns int nanoseconds */
    long long *raw;  /* pending records made here: node, start, end, ... */
    Py_ssize_t raw_len, raw_cap;
    long long *marks; /* (packed record index, records in buf from then on), each time that count changed */
    Py_ssize_t marks_len, marks_cap;
    long long listed; /* records in buf as of the last mark */
} CoreObject;

static PyObject *core_get_buf(CoreObject *self, void *Py_UNUSED(closure)) {
    if (self->buf == NULL) return PyErr_Format(PyExc_AttributeError, "_buf is not set yet");
    Py_INCREF(self->buf);
    return self->buf;
}

static int core_set_buf(CoreObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    if (refuse_delete(value, "_buf") < 0) return -1;
    if (!PyList_CheckExact(value)) {
        PyErr_Format(PyExc_TypeError, "_buf must be a list, got %R", value);
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(self->buf, value);
    return 0;
}

static PyObject *core_get_clock(CoreObject *self, void *Py_UNUSED(closure)) {
    if (self->clock == NULL) return PyErr_Format(PyExc_AttributeError, "clock is not set yet");
    Py_INCREF(self->clock);
    return self->clock;
}

static int core_set_clock(CoreObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    if (refuse_delete(value, "clock") < 0) return -1;
    if (!PyCallable_Check(value)) {
        PyErr_Format(PyExc_TypeError, "clock must be a callable returning nanoseconds, got %R", value);
        return -1;
    }
    Py_INCREF(value);
    Py_XSETREF(self->clock, value);
    return 0;
}

/* Room for `more` int64 in a growable array (doubling from 3072). */
static int reserve(long long **data, Py_ssize_t *cap, Py_ssize_t len, Py_ssize_t more) {
    if (len + more <= *cap) return 0;
    Py_ssize_t grown = *cap ? *cap : 3 * 1024;
    while (grown < len + more) grown *= 2;
    long long *moved = PyMem_Realloc(*data, (size_t)grown * sizeof(long long));
    if (moved == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *data = moved;
    *cap = grown;
    return 0;
}

static PyObject *as_bytes(const long long *data, Py_ssize_t len) {
    return PyBytes_FromStringAndSize((const char *)data, len * (Py_ssize_t)sizeof(long long));
}

/* Everything pending, taken at one instant: (the listed records, as a list of ints; the packed ones
 * and their marks, as bytes of int64: node, start, end each; record index, records listed from then
 * on, each). */
static PyObject *core_take_pending(CoreObject *self, PyObject *Py_UNUSED(ignored)) {
    if (self->buf == NULL) return PyErr_Format(PyExc_AttributeError, "_buf is not set yet");
    Py_ssize_t len = PyList_GET_SIZE(self->buf);
    Py_ssize_t n = len - len % 3;
    PyObject *listed = PyList_GetSlice(self->buf, 0, n);
    PyObject *packed = as_bytes(self->raw, self->raw_len);
    PyObject *marks = as_bytes(self->marks, self->marks_len);
    /* `listed` holds the items, so cutting them from the list frees nothing and runs no Python code */
    PyObject *out = listed && packed && marks ? PyTuple_Pack(3, listed, packed, marks) : NULL;
    Py_XDECREF(listed);
    Py_XDECREF(packed);
    Py_XDECREF(marks);
    if (out == NULL || PyList_SetSlice(self->buf, 0, n, NULL) < 0) {
        Py_XDECREF(out);
        return NULL;
    }
    self->raw_len = self->marks_len = 0;
    self->listed = 0; /* what is left of the list is less than a record */
    if (self->raw_cap > 3 * 65536) { /* a burst grew it: give the memory back */
        PyMem_Free(self->raw);
        self->raw = NULL;
        self->raw_cap = 0;
    }
    return out;
}

static PyObject *core_pending(CoreObject *self, void *Py_UNUSED(closure)) {
    Py_ssize_t listed = self->buf ? PyList_GET_SIZE(self->buf) : 0;
    return PyLong_FromSsize_t(self->raw_len / 3 + listed / 3);
}

static PyMethodDef core_methods[] = {
    {"_take_pending", (PyCFunction)core_take_pending, METH_NOARGS,
     "Every pending record, taken at one instant: (listed ints, packed int64 node/start/end, marks: "
     "packed index/records listed from then on)."},
    {NULL},
};

static PyGetSetDef core_getset[] = {
    {"_buf", (getter)core_get_buf, (setter)core_set_buf, "Pending records of the Python path, three ints each.",
     NULL},
    {"clock", (getter)core_get_clock, (setter)core_set_clock, "The registry's clock (int nanoseconds).", NULL},
    {"pending", (getter)core_pending, NULL, "Records made and not yet drained.", NULL},
    {NULL},
};

static int core_traverse(CoreObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->buf);
    Py_VISIT(self->clock);
    return 0;
}

static int core_clear(CoreObject *self) {
    Py_CLEAR(self->buf);
    Py_CLEAR(self->clock);
    return 0;
}

static void core_dealloc(CoreObject *self) {
    PyObject_GC_UnTrack(self);
    core_clear(self);
    PyMem_Free(self->raw);
    PyMem_Free(self->marks);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "perfkit._speedups.RegistryCore",
    .tp_doc = "The fields of a Registry that every record touches: its pending records and its clock.",
    .tp_basicsize = sizeof(CoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)core_traverse,
    .tp_clear = (inquiry)core_clear,
    .tp_dealloc = (destructor)core_dealloc,
    .tp_methods = core_methods,
    .tp_getset = core_getset,
};

/* ---------------------------------------------------------------- shared steps */

/* The registry an entry point records into (new reference), or NULL (no error set) when it is not a
 * Registry ready to record: the Python path then says what is wrong. */
static PyObject *registry_of(PyObject *given) {
    PyObject *reg;
    if (given != NULL && given != Py_None) {
        Py_INCREF(given);
        reg = given;
    } else if (PyContextVar_Get(g_registry_var, NULL, &reg) < 0 || reg == NULL) {
        PyErr_Clear();
        return NULL;
    }
    CoreObject *core = (CoreObject *)reg;
    if (!PyObject_TypeCheck(reg, &CoreType) || core->buf == NULL || core->clock == NULL) {
        Py_DECREF(reg);
        return NULL;
    }
    return reg;
}

/* This context's cell (new reference) when it is a list holding an open node and an owner; else
 * NULL (no error set): the Python path makes one. */
static PyObject *cell_of_context(void) {
    PyObject *cell;
    if (PyContextVar_Get(g_cell_var, NULL, &cell) < 0) {
        PyErr_Clear();
        return NULL;
    }
    if (cell == NULL) return NULL;
    if (!PyList_CheckExact(cell) || PyList_GET_SIZE(cell) < 2) {
        Py_DECREF(cell);
        return NULL;
    }
    return cell;
}

/* kids.get(parent), borrowed; NULL (no error set) when not yet interned. */
static inline PyObject *kid(PyObject *kids, PyObject *parent) {
    if (kids == NULL || !PyDict_CheckExact(kids)) return NULL;
    PyObject *node = PyDict_GetItemWithError(kids, parent);
    if (node == NULL) PyErr_Clear();
    return node;
}

/* cell[0] = value, when the cell still has a first item. */
static inline void set_open(PyObject *cell, PyObject *value) {
    if (PyList_GET_SIZE(cell) > 0) {
        PyObject *old = PyList_GET_ITEM(cell, 0);
        Py_INCREF(value);
        PyList_SET_ITEM(cell, 0, value);
        Py_DECREF(old);
    }
}

/* A clock reading: int64 nanoseconds, or (odd != NULL, owned) a value that is not one, which the
 * record then carries as is to the drain's checks, like the Python path's records. */
typedef struct {
    long long ns;
    PyObject *odd;
} Stamp;

static inline void stamp_of(PyObject *value, Stamp *s) {
    s->odd = NULL;
    if (PyLong_CheckExact(value)) {
        int overflow;
        s->ns = PyLong_AsLongLongAndOverflow(value, &overflow);
        if (!overflow && !(s->ns == -1 && PyErr_Occurred())) return;
        PyErr_Clear();
    }
    Py_INCREF(value);
    s->odd = value;
}

/* reg.clock(), read directly when it is time.perf_counter_ns (CPython reads CLOCK_MONOTONIC for it). */
static inline int stamp_now(CoreObject *reg, Stamp *s) {
#if defined(__linux__)
    struct timespec ts;
    if (reg->clock == g_perf_counter && clock_gettime(CLOCK_MONOTONIC, &ts) == 0) {
        s->ns = (long long)ts.tv_sec * 1000000000LL + (long long)ts.tv_nsec;
        s->odd = NULL;
        return 0;
    }
#endif
    PyObject *value = PyObject_CallNoArgs(reg->clock);
    if (value == NULL) return -1;
    stamp_of(value, s);
    Py_DECREF(value);
    return 0;
}

static inline PyObject *stamp_object(const Stamp *s) {
    if (s->odd != NULL) {
        Py_INCREF(s->odd);
        return s->odd;
    }
    return PyLong_FromLongLong(s->ns);
}

static inline void stamp_clear(Stamp *s) {
    Py_CLEAR(s->odd);
}

typedef struct {
    PyObject *node;
    int failed;
    const Stamp *t0, *t1;
} Record;

/* Append records, all or none: packed where every time is an int64, else on the list (a clock
 * that misbehaves: the drain checks and counts such records). */
static int add_records(CoreObject *reg, const Record *recs, int n) {
    int packed = 1;
    long long nodes[2];
    for (int i = 0; i < n; i++) {
        packed = packed && recs[i].t0->odd == NULL && recs[i].t1->odd == NULL;
        nodes[i] = PyLong_AsLongLong(recs[i].node);
        if (nodes[i] == -1 && PyErr_Occurred()) return -1;
    }
    if (packed) {
        long long listed = (long long)(PyList_GET_SIZE(reg->buf) / 3);
        int mark = listed != reg->listed;
        if (reserve(&reg->raw, &reg->raw_cap, reg->raw_len, 3 * n) < 0
            || (mark && reserve(&reg->marks, &reg->marks_cap, reg->marks_len, 2) < 0))
            return -1;
        if (mark) { /* the Python path appended since: the records from here on come after those */
            reg->marks[reg->marks_len++] = (long long)(reg->raw_len / 3);
            reg->marks[reg->marks_len++] = listed;
            reg->listed = listed;
        }
        long long *at = reg->raw + reg->raw_len;
        for (int i = 0; i < n; i++, at += 3) {
            at[0] = recs[i].failed ? ~nodes[i] : nodes[i];
            at[1] = recs[i].t0->ns;
            at[2] = recs[i].t1->ns;
        }
        reg->raw_len += 3 * n;
        return 0;
    }
    /* Appended one by one (list.append is far cheaper than an extend), all or none: on a failure the
     * list is cut back to where it was. No Python code runs in between, so no other thread appends. */
    PyObject *buf = reg->buf;
    Py_ssize_t before = PyList_GET_SIZE(buf);
    for (int i = 0; i < n; i++) {
        PyObject *head = recs[i].failed ? PyLong_FromLongLong(~nodes[i]) : (Py_INCREF(recs[i].node), recs[i].node);
        PyObject *t0 = stamp_object(recs[i].t0), *t1 = stamp_object(recs[i].t1);
        int ok = head != NULL && t0 != NULL && t1 != NULL && PyList_Append(buf, head) == 0
                 && PyList_Append(buf, t0) == 0 && PyList_Append(buf, t1) == 0;
        Py_XDECREF(head);
        Py_XDECREF(t0);
        Py_XDECREF(t1);
        if (!ok) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            PyList_SetSlice(buf, before, PyList_GET_SIZE(buf), NULL);
            PyErr_Restore(type, value, tb);
            return -1;
        }
    }
    return 0;
}

static inline int add_record(CoreObject *reg, PyObject *node, int failed, const Stamp *t0, const Stamp *t1) {
    Record rec = {node, failed, t0, t1};
    return add_records(reg, &rec, 1);
}

static int drain_if_full(CoreObject *reg) {
    if (reg->raw_len + PyList_GET_SIZE(reg->buf) > g_drain_at) {
        PyObject *r = PyObject_CallMethodNoArgs((PyObject *)reg, g_str_drain);
        if (r == NULL) return -1;
        Py_DECREF(r);
    }
    return 0;
}

/* After the timed code raised (its exception fetched into type/value/tb): record the failure, read
 * the clock, drain if full; then raise the code's exception again, or, if one of those failed, its
 * error in the context of the code's exception. */
static void record_failure(CoreObject *reg, PyObject *node, const Stamp *t0, PyObject *type, PyObject *value,
                           PyObject *tb) {
    Stamp t1;
    int ok = stamp_now(reg, &t1) == 0;
    if (ok) {
        ok = add_record(reg, node, 1, t0, &t1) == 0 && drain_if_full(reg) == 0;
        stamp_clear(&t1);
    }
    if (ok)
        PyErr_Restore(type, value, tb);
    else
        raise_in_context(type, value, tb);
}

/* ---------------------------------------------------------------- TimedFunction (@timed) */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *fn;       /* the decorated function */
    PyObject *name;     /* its series */
    PyObject *registry; /* the registry given to timed(), or None */
    PyObject *kids;     /* NODES.kids(name): open node -> node */
    PyObject *slow;     /* the pure-Python wrapper: every call the fast path does not take */
    PyObject *dict;
    PyObject *weakreflist;
} TimedObject;

static PyObject *timed_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    TimedObject *self = (TimedObject *)callable;
    if (!g_ready) return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    if (!switch_on()) return PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
    if (!no_tracer()) return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    PyObject *reg = registry_of(self->registry);
    if (reg == NULL) return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    PyObject *cell = cell_of_context();
    if (cell == NULL) {
        Py_DECREF(reg);
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    }
    PyObject *parent = PyList_GET_ITEM(cell, 0);
    PyObject *node = kid(self->kids, parent);
    if (node == NULL) {
        Py_DECREF(cell);
        Py_DECREF(reg);
        return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
    }
    Py_INCREF(parent);
    Py_INCREF(node);
    CoreObject *core = (CoreObject *)reg;
    PyObject *result = NULL;
    Stamp t0, t1;
    if (stamp_now(core, &t0) == 0) {
        set_open(cell, node);
        result = PyObject_Vectorcall(self->fn, args, nargsf, kwnames);
        set_open(cell, parent);
        if (result == NULL) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            record_failure(core, node, &t0, type, value, tb);
        } else if (stamp_now(core, &t1) < 0) {
            Py_CLEAR(result);
        } else {
            if (add_record(core, node, 0, &t0, &t1) < 0 || drain_if_full(core) < 0) Py_CLEAR(result);
            stamp_clear(&t1);
        }
        stamp_clear(&t0);
    }
    Py_DECREF(node);
    Py_DECREF(parent);
    Py_DECREF(cell);
    Py_DECREF(reg);
    return result;
}

static PyObject *timed_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"fn", "name", "registry", "kids", "slow", NULL};
    PyObject *fn, *name, *registry, *kids, *slow;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OUOO!O:TimedFunction", kwlist, &fn, &name, &registry,
                                     &PyDict_Type, &kids, &slow))
        return NULL;
    if (!PyCallable_Check(fn) || !PyCallable_Check(slow)) {
        PyErr_SetString(PyExc_TypeError, "TimedFunction needs callables for fn and slow");
        return NULL;
    }
    TimedObject *self = (TimedObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = timed_vectorcall;
    Py_INCREF(fn);
    self->fn = fn;
    Py_INCREF(name);
    self->name = name;
    Py_INCREF(registry);
    self->registry = registry;
    Py_INCREF(kids);
    self->kids = kids;
    Py_INCREF(slow);
    self->slow = slow;
    return (PyObject *)self;
}

static int timed_traverse(TimedObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->fn);
    Py_VISIT(self->name);
    Py_VISIT(self->registry);
    Py_VISIT(self->kids);
    Py_VISIT(self->slow);
    Py_VISIT(self->dict);
    return 0;
}

static int timed_clear(TimedObject *self) {
    Py_CLEAR(self->fn);
    Py_CLEAR(self->name);
    Py_CLEAR(self->registry);
    Py_CLEAR(self->kids);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->dict);
    return 0;
}

static void timed_dealloc(TimedObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    timed_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* A method's wrapper binds like a function: instance.method is a bound method. */
static PyObject *timed_descr_get(PyObject *self, PyObject *obj, PyObject *type) {
    if (obj == NULL || obj == Py_None) {
        Py_INCREF(self);
        return self;
    }
    return PyMethod_New(self, obj);
}

/* The wrapper's __qualname__ (a new reference; update_wrapper put it in the instance dict), or NULL. */
static PyObject *qualname_of(TimedObject *self) {
    if (self->dict == NULL) return NULL;
    PyObject *value = PyDict_GetItemString(self->dict, "__qualname__");
    Py_XINCREF(value);
    return value;
}

static PyObject *timed_repr(TimedObject *self) {
    PyObject *qualname = qualname_of(self);
    PyObject *out = PyUnicode_FromFormat("<timed function %S at %p>", qualname ? qualname : self->name, self);
    Py_XDECREF(qualname);
    return out;
}

/* Pickled by reference, as functions are: a spawn-started DataLoader worker imports it anew. */
static PyObject *timed_reduce(TimedObject *self, PyObject *Py_UNUSED(ignored)) {
    PyObject *qualname = qualname_of(self);
    if (qualname == NULL) PyErr_SetString(PyExc_TypeError, "a timed function without __qualname__ cannot be pickled");
    return qualname;
}

static PyMethodDef timed_methods[] = {
    {"__reduce__", (PyCFunction)timed_reduce, METH_NOARGS, NULL},
    {NULL},
};

static PyMemberDef timed_members[] = {
    {"__vectorcalloffset__", T_PYSSIZET, offsetof(TimedObject, vectorcall), READONLY},
    {"__dictoffset__", T_PYSSIZET, offsetof(TimedObject, dict), READONLY},
    {"__weaklistoffset__", T_PYSSIZET, offsetof(TimedObject, weakreflist), READONLY},
    {"_series", T_OBJECT, offsetof(TimedObject, name), READONLY, "The series each call is recorded in."},
    {NULL},
};

static PyGetSetDef timed_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyTypeObject TimedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "perfkit._speedups.TimedFunction",
    .tp_doc = "A function decorated with @timed: each call is recorded (compiled hot path).",
    .tp_basicsize = sizeof(TimedObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL
                | Py_TPFLAGS_METHOD_DESCRIPTOR,
    .tp_new = timed_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(TimedObject, vectorcall),
    .tp_dictoffset = offsetof(TimedObject, dict),
    .tp_weaklistoffset = offsetof(TimedObject, weakreflist),
    .tp_descr_get = timed_descr_get,
    .tp_repr = (reprfunc)timed_repr,
    .tp_traverse = (traverseproc)timed_traverse,
    .tp_clear = (inquiry)timed_clear,
    .tp_dealloc = (destructor)timed_dealloc,
    .tp_methods = timed_methods,
    .tp_members = timed_members,
    .tp_getset = timed_getset,
};

/* ---------------------------------------------------------------- SectionCore (section) */

typedef struct {
    PyObject_HEAD
    PyObject *name;
    PyObject *registry;
    PyObject *kids;
    PyObject *enter_bound; /* __enter__ and __exit__ bound to this section, made at first use */
    PyObject *exit_bound;
} SectionObject;

static PyMemberDef section_members[] = {
    {"name", T_OBJECT_EX, offsetof(SectionObject, name), 0, "The series each block is recorded in."},
    {"_registry", T_OBJECT_EX, offsetof(SectionObject, registry), 0, NULL},
    {"_kids", T_OBJECT_EX, offsetof(SectionObject, kids), 0, NULL},
    {NULL},
};

static PyObject *call_slow(PyObject *fn, PyObject *self, PyObject *const *rest, Py_ssize_t nrest) {
    PyObject *stack[4];
    stack[0] = self;
    for (Py_ssize_t i = 0; i < nrest && i < 3; i++) stack[i + 1] = rest[i];
    if (fn == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "perfkit._speedups is not configured");
        return NULL;
    }
    return PyObject_Vectorcall(fn, stack, 1 + nrest, NULL);
}

static PyObject *section_enter(SectionObject *self) {
    PyObject *me = (PyObject *)self;
    if (!g_ready) return call_slow(g_section_enter, me, NULL, 0);
    if (!switch_on()) {
        Py_INCREF(me);
        return me;
    }
    /* A cell shared with another task or thread is not ours to push on: asked only while a task
     * runs somewhere, or when the cell is not a thread's (its owner is not an int). */
    if (!no_tracer() || !PyDict_CheckExact(g_running_tasks) || PyDict_GET_SIZE(g_running_tasks) != 0)
        return call_slow(g_section_enter, me, NULL, 0);
    PyObject *reg = registry_of(self->registry);
    if (reg == NULL) return call_slow(g_section_enter, me, NULL, 0);
    PyObject *cell = cell_of_context();
    if (cell == NULL || !PyLong_CheckExact(PyList_GET_ITEM(cell, 1))) {
        Py_XDECREF(cell);
        Py_DECREF(reg);
        return call_slow(g_section_enter, me, NULL, 0);
    }
    PyObject *parent = PyList_GET_ITEM(cell, 0);
    PyObject *node = kid(self->kids, parent);
    if (node == NULL) {
        Py_DECREF(cell);
        Py_DECREF(reg);
        return call_slow(g_section_enter, me, NULL, 0);
    }
    Py_INCREF(parent); /* a Python clock may run: hold what we read */
    Py_INCREF(node);
    Stamp start;
    PyObject *t0 = NULL;
    if (stamp_now((CoreObject *)reg, &start) == 0) {
        t0 = stamp_object(&start);
        stamp_clear(&start);
    }
    PyObject *frame = t0 == NULL ? NULL : PyTuple_Pack(7, me, parent, node, reg, t0, Py_None, Py_None);
    Py_XDECREF(t0);
    PyObject *result = NULL;
    if (frame != NULL) {
        set_open(cell, node);
        if (PyList_Append(cell, frame) == 0) {
            Py_INCREF(me);
            result = me;
        } else {
            set_open(cell, parent);
        }
        Py_DECREF(frame);
    }
    Py_DECREF(node);
    Py_DECREF(parent);
    Py_DECREF(cell);
    Py_DECREF(reg);
    return result;
}

static PyObject *section_exit(SectionObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *me = (PyObject *)self;
    if (nargs != 3) {
        PyErr_Format(PyExc_TypeError, "__exit__ takes 3 arguments (%zd given)", nargs);
        return NULL;
    }
    if (!g_ready) return call_slow(g_section_exit, me, args, 3);
    PyObject *cell = cell_of_context();
    Py_ssize_t n = cell == NULL ? 0 : PyList_GET_SIZE(cell);
    if (n <= 2 && !switch_on()) {
        /* No frame open here and perfkit is off: the block was entered while disabled. */
        Py_XDECREF(cell);
        Py_RETURN_NONE;
    }
    if (cell == NULL) return call_slow(g_section_exit, me, args, 3);
    PyObject *frame = n > 2 ? PyList_GET_ITEM(cell, n - 1) : NULL;
    /* Only our own frame on top, with no trace range to end: anything else is the Python path's. */
    if (frame == NULL || !PyTuple_CheckExact(frame) || PyTuple_GET_SIZE(frame) != 7
        || PyTuple_GET_ITEM(frame, 0) != me || PyTuple_GET_ITEM(frame, 5) != Py_None
        || !PyObject_TypeCheck(PyTuple_GET_ITEM(frame, 3), &CoreType)
        || ((CoreObject *)PyTuple_GET_ITEM(frame, 3))->buf == NULL) {
        Py_DECREF(cell);
        return call_slow(g_section_exit, me, args, 3);
    }
    CoreObject *reg = (CoreObject *)PyTuple_GET_ITEM(frame, 3);
    /* cell.pop(): the list's reference to the frame becomes ours (it keeps reg alive). */
    Py_SET_SIZE(cell, n - 1);
    set_open(cell, PyTuple_GET_ITEM(frame, 1));
    PyObject *result = NULL;
    Stamp t0, t1;
    if (stamp_now(reg, &t1) == 0) {
        stamp_of(PyTuple_GET_ITEM(frame, 4), &t0);
        if (add_record(reg, PyTuple_GET_ITEM(frame, 2), args[0] != Py_None, &t0, &t1) == 0
            && drain_if_full(reg) == 0) {
            Py_INCREF(Py_None);
            result = Py_None;
        }
        stamp_clear(&t0);
        stamp_clear(&t1);
    }
    Py_DECREF(frame);
    Py_DECREF(cell);
    return result;
}

/* A section's __enter__ and __exit__. A `with` looks both up on every block, and the bound method
 * that a lookup makes costs about as much as the block's own recording; so each section binds them
 * once, and the lookup hands out those. On the class (Section.__enter__(section)), unbound. A bound
 * step holds its section (the `with` may hold only the step), so the two are a reference cycle,
 * freed by the cyclic GC; sections are cached for the life of the process anyway. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *section; /* NULL on the class */
    int exit;          /* 0: __enter__, 1: __exit__ */
} StepObject;

static PyTypeObject StepType;
static PyTypeObject SectionType;

static PyObject *step_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    StepObject *step = (StepObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *section = step->section;
    const char *what = step->exit ? "__exit__" : "__enter__";
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) != 0) {
        PyErr_Format(PyExc_TypeError, "%s takes no keyword arguments", what);
        return NULL;
    }
    if (section == NULL) {
        if (nargs < 1 || !PyObject_TypeCheck(args[0], &SectionType)) {
            PyErr_Format(PyExc_TypeError, "%s needs a section as its first argument", what);
            return NULL;
        }
        section = args[0];
        args++;
        nargs--;
    }
    if (step->exit) return section_exit((SectionObject *)section, args, nargs);
    if (nargs != 0) {
        PyErr_Format(PyExc_TypeError, "__enter__ takes no arguments (%zd given)", nargs);
        return NULL;
    }
    return section_enter((SectionObject *)section);
}

static PyObject *step_new(PyObject *section, int exit) {
    StepObject *step = PyObject_GC_New(StepObject, &StepType);
    if (step == NULL) return NULL;
    step->vectorcall = step_vectorcall;
    Py_XINCREF(section);
    step->section = section;
    step->exit = exit;
    PyObject_GC_Track(step);
    return (PyObject *)step;
}

static PyObject *step_get(PyObject *descr, PyObject *obj, PyObject *type) {
    StepObject *step = (StepObject *)descr;
    if (obj == NULL || obj == Py_None || step->section != NULL || !PyObject_TypeCheck(obj, &SectionType)) {
        Py_INCREF(descr);
        return descr;
    }
    SectionObject *section = (SectionObject *)obj;
    PyObject **slot = step->exit ? &section->exit_bound : &section->enter_bound;
    if (*slot == NULL) {
        PyObject *made = step_new(obj, step->exit); /* may run the GC, finalizers, other threads */
        if (made == NULL) return NULL;
        if (*slot == NULL)
            *slot = made;
        else
            Py_DECREF(made);
    }
    Py_INCREF(*slot);
    return *slot;
}

static int step_traverse(StepObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->section);
    return 0;
}

static int step_clear(StepObject *self) {
    Py_CLEAR(self->section);
    return 0;
}

static void step_dealloc(StepObject *self) {
    PyObject_GC_UnTrack(self);
    step_clear(self);
    PyObject_GC_Del(self);
}

static PyObject *step_repr(StepObject *self) {
    const char *what = self->exit ? "__exit__" : "__enter__";
    if (self->section == NULL) return PyUnicode_FromFormat("<section method %s>", what);
    return PyUnicode_FromFormat("<section method %s of %R>", what, self->section);
}

static PyTypeObject StepType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "perfkit._speedups.SectionStep",
    .tp_doc = "A section's __enter__ or __exit__, bound once per section.",
    .tp_basicsize = sizeof(StepObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(StepObject, vectorcall),
    .tp_descr_get = step_get,
    .tp_repr = (reprfunc)step_repr,
    .tp_traverse = (traverseproc)step_traverse,
    .tp_clear = (inquiry)step_clear,
    .tp_dealloc = (destructor)step_dealloc,
};

static int section_traverse(SectionObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->name);
    Py_VISIT(self->registry);
    Py_VISIT(self->kids);
    Py_VISIT(self->enter_bound);
    Py_VISIT(self->exit_bound);
    return 0;
}

static int section_clear(SectionObject *self) {
    Py_CLEAR(self->name);
    Py_CLEAR(self->registry);
    Py_CLEAR(self->kids);
    Py_CLEAR(self->enter_bound);
    Py_CLEAR(self->exit_bound);
    return 0;
}

static void section_dealloc(SectionObject *self) {
    PyObject_GC_UnTrack(self);
    section_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject SectionType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "perfkit._speedups.SectionCore",
    .tp_doc = "A section's fields and its compiled __enter__ and __exit__.",
    .tp_basicsize = sizeof(SectionObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_traverse = (traverseproc)section_traverse,
    .tp_clear = (inquiry)section_clear,
    .tp_dealloc = (destructor)section_dealloc,
    .tp_members = section_members,
};

/* ---------------------------------------------------------------- SectionLookup (section()) */

/* section(name) and section(name, registry=reg): the cached Section, found in the dictionaries the
 * Python function fills (by name; by registry, then name). A miss, cuda=, or any other form of the
 * call goes to the Python function, which checks the arguments, builds and caches. */
typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    PyObject *by_name;
    PyObject *by_registry;
    PyObject *slow;
    PyObject *dict;
    PyObject *weakreflist;
} LookupObject;

static PyObject *lookup_hit(PyObject *table, PyObject *name) {
    if (table == NULL || !PyDict_CheckExact(table)) return NULL;
    PyObject *hit = PyDict_GetItemWithError(table, name);
    if (hit == NULL) {
        PyErr_Clear();
        return NULL;
    }
    Py_INCREF(hit);
    return hit;
}

static PyObject *lookup_vectorcall(PyObject *callable, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
    LookupObject *self = (LookupObject *)callable;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nkw = kwnames == NULL ? 0 : PyTuple_GET_SIZE(kwnames);
    if (nargs == 1 && PyUnicode_CheckExact(args[0])) {
        PyObject *hit = NULL;
        if (nkw == 0) {
            hit = lookup_hit(self->by_name, args[0]);
        } else if (nkw == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "registry") == 0) {
            PyObject *reg = args[1];
            if (reg == Py_None) {
                hit = lookup_hit(self->by_name, args[0]);
            } else if (PyObject_TypeCheck(reg, &CoreType)) {
                PyObject *table = lookup_hit(self->by_registry, reg);
                if (table != NULL) {
                    hit = lookup_hit(table, args[0]);
                    Py_DECREF(table);
                }
            }
        }
        if (hit != NULL) return hit;
    }
    return PyObject_Vectorcall(self->slow, args, nargsf, kwnames);
}

static PyObject *lookup_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    PyObject *by_name, *by_registry, *slow;
    if (!PyArg_ParseTuple(args, "O!O!O:SectionLookup", &PyDict_Type, &by_name, &PyDict_Type, &by_registry, &slow))
        return NULL;
    LookupObject *self = (LookupObject *)type->tp_alloc(type, 0);
    if (self == NULL) return NULL;
    self->vectorcall = lookup_vectorcall;
    Py_INCREF(by_name);
    self->by_name = by_name;
    Py_INCREF(by_registry);
    self->by_registry = by_registry;
    Py_INCREF(slow);
    self->slow = slow;
    return (PyObject *)self;
}

static int lookup_traverse(LookupObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->by_name);
    Py_VISIT(self->by_registry);
    Py_VISIT(self->slow);
    Py_VISIT(self->dict);
    return 0;
}

static int lookup_clear(LookupObject *self) {
    Py_CLEAR(self->by_name);
    Py_CLEAR(self->by_registry);
    Py_CLEAR(self->slow);
    Py_CLEAR(self->dict);
    return 0;
}

static void lookup_dealloc(LookupObject *self) {
    PyObject_GC_UnTrack(self);
    if (self->weakreflist != NULL) PyObject_ClearWeakRefs((PyObject *)self);
    lookup_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *lookup_reduce(LookupObject *self, PyObject *Py_UNUSED(ignored)) {
    return PyObject_GetAttrString(self->slow, "__qualname__");
}

static PyObject *lookup_repr(LookupObject *self) {
    return PyUnicode_FromFormat("<function %S (compiled lookup)>", self->slow);
}

static PyMethodDef lookup_methods[] = {
    {"__reduce__", (PyCFunction)lookup_reduce, METH_NOARGS, NULL},
    {NULL},
};

static PyGetSetDef lookup_getset[] = {
    {"__dict__", PyObject_GenericGetDict, PyObject_GenericSetDict},
    {NULL},
};

static PyTypeObject LookupType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "perfkit._speedups.SectionLookup",
    .tp_doc = "section(): the cached Section found in C; every other call goes to the Python function.",
    .tp_basicsize = sizeof(LookupObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_HAVE_VECTORCALL,
    .tp_new = lookup_new,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(LookupObject, vectorcall),
    .tp_dictoffset = offsetof(LookupObject, dict),
    .tp_weaklistoffset = offsetof(LookupObject, weakreflist),
    .tp_repr = (reprfunc)lookup_repr,
    .tp_traverse = (traverseproc)lookup_traverse,
    .tp_clear = (inquiry)lookup_clear,
    .tp_dealloc = (destructor)lookup_dealloc,
    .tp_methods = lookup_methods,
    .tp_getset = lookup_getset,
};

/* ---------------------------------------------------------------- IterCore (timed_iter) */

typedef struct {
    PyObject_HEAD
    PyObject *it;
    Stamp last; /* start of the previous item's wait, when has_last */
    int has_last;
    PyObject *registry;
    PyObject *source;
    PyObject *wait;
    PyObject *turn;
    PyObject *wait_kids;
    PyObject *turn_kids;
    PyObject *name;
} IterObject;

static PyMemberDef iter_members[] = {
    {"_it", T_OBJECT_EX, offsetof(IterObject, it), 0, NULL},
    {"_registry", T_OBJECT_EX, offsetof(IterObject, registry), 0, NULL},
    {"_source", T_OBJECT_EX, offsetof(IterObject, source), 0, NULL},
    {"_wait", T_OBJECT_EX, offsetof(IterObject, wait), 0, NULL},
    {"_turn", T_OBJECT_EX, offsetof(IterObject, turn), 0, NULL},
    {"_wait_kids", T_OBJECT_EX, offsetof(IterObject, wait_kids), 0, NULL},
    {"_turn_kids", T_OBJECT_EX, offsetof(IterObject, turn_kids), 0, NULL},
    {"name", T_OBJECT_EX, offsetof(IterObject, name), 0, "The loader's name."},
    {NULL},
};

static void forget_last(IterObject *self) {
    self->has_last = 0;
    stamp_clear(&self->last);
}

/* _last: the start of the previous item's wait (an int) or None, as the Python path keeps it. */
static PyObject *iter_get_last(IterObject *self, void *Py_UNUSED(closure)) {
    if (!self->has_last) Py_RETURN_NONE;
    return stamp_object(&self->last);
}

static int iter_set_last(IterObject *self, PyObject *value, void *Py_UNUSED(closure)) {
    if (refuse_delete(value, "_last") < 0) return -1;
    forget_last(self);
    if (value != Py_None) {
        stamp_of(value, &self->last);
        self->has_last = 1;
    }
    return 0;
}

static PyGetSetDef iter_getset[] = {
    {"_last", (getter)iter_get_last, (setter)iter_set_last, NULL, NULL},
    {NULL},
};

/* The source's last next() (from t0, ended by StopIteration) handed to the Python path's _record_end. */
static int record_end(PyObject *me, PyObject *parent, Stamp *t0) {
    PyObject *start = stamp_object(t0);
    if (start == NULL) return -1;
    PyObject *args[3] = {me, parent, start};
    PyObject *done = PyObject_Vectorcall(g_iter_end, args, 3, NULL);
    Py_DECREF(start);
    if (done == NULL) return -1;
    Py_DECREF(done);
    return 0;
}

static PyObject *iter_next(IterObject *self) {
    PyObject *me = (PyObject *)self;
    if (!g_ready || self->it == NULL || Py_TYPE(self->it)->tp_iternext == NULL)
        return call_slow(g_iter_next, me, NULL, 0);
    if (!switch_on()) {
        forget_last(self);
        return Py_TYPE(self->it)->tp_iternext(self->it);
    }
    if (!no_tracer()) return call_slow(g_iter_next, me, NULL, 0);
    PyObject *reg = registry_of(self->registry);
    if (reg == NULL) return call_slow(g_iter_next, me, NULL, 0);
    PyObject *cell = cell_of_context();
    if (cell == NULL) {
        Py_DECREF(reg);
        return call_slow(g_iter_next, me, NULL, 0);
    }
    PyObject *parent = PyList_GET_ITEM(cell, 0);
    PyObject *node = kid(self->wait_kids, parent);
    PyObject *turn = self->has_last ? kid(self->turn_kids, parent) : Py_None;
    if (node == NULL || turn == NULL) {
        Py_DECREF(cell);
        Py_DECREF(reg);
        return call_slow(g_iter_next, me, NULL, 0);
    }
    Py_INCREF(parent);
    Py_INCREF(node);
    Py_INCREF(turn);
    /* The previous wait's start, as it was when this turn began (the source's next() runs Python). */
    Stamp last = self->last;
    int had_last = self->has_last;
    Py_XINCREF(last.odd);
    CoreObject *core = (CoreObject *)reg;
    PyObject *item = NULL;
    Stamp t0, t1;
    if (stamp_now(core, &t0) == 0) {
        set_open(cell, node);
        PyObject *it = self->it;
        Py_INCREF(it);
        item = Py_TYPE(it)->tp_iternext(it);
        Py_DECREF(it);
        set_open(cell, parent);
        if (item == NULL) {
            PyObject *type, *value, *tb;
            PyErr_Fetch(&type, &value, &tb);
            if (type != NULL && !PyErr_GivenExceptionMatches(type, PyExc_StopIteration)) {
                record_failure(core, node, &t0, type, value, tb);
            } else {
                /* The source is exhausted: the last turn ends where this wait started, and this
                   last call is the loop's wait too (workers shutting down), recorded by the Python
                   path's own function (once a loop). */
                int failed = had_last ? add_record(core, turn, 0, &last, &t0) : 0;
                if (failed == 0) {
                    if (had_last) forget_last(self);
                    failed = record_end(me, parent, &t0);
                }
                if (failed == 0) {
                    PyErr_Restore(type, value, tb);
                } else {
                    raise_in_context(type, value, tb);
                }
            }
        } else if (stamp_now(core, &t1) < 0) {
            Py_CLEAR(item);
        } else {
            /* Turns overlap the waits and the loop body: their node stays out of the section tree. */
            Record recs[2] = {{node, 0, &t0, &t1}, {turn, 0, &last, &t0}};
            if (add_records(core, recs, had_last ? 2 : 1) < 0) {
                Py_CLEAR(item);
            } else {
                forget_last(self);
                self->last.ns = t0.ns;
                self->last.odd = t0.odd;
                Py_XINCREF(t0.odd);
                self->has_last = 1;
                if (drain_if_full(core) < 0) Py_CLEAR(item);
            }
            stamp_clear(&t1);
        }
        stamp_clear(&t0);
    }
    stamp_clear(&last);
    Py_DECREF(turn);
    Py_DECREF(node);
    Py_DECREF(parent);
    Py_DECREF(cell);
    Py_DECREF(reg);
    return item;
}

static int iter_traverse(IterObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->it);
    Py_VISIT(self->last.odd);
    Py_VISIT(self->registry);
    Py_VISIT(self->source);
    Py_VISIT(self->wait);
    Py_VISIT(self->turn);
    Py_VISIT(self->wait_kids);
    Py_VISIT(self->turn_kids);
    Py_VISIT(self->name);
    return 0;
}

static int iter_clear(IterObject *self) {
    Py_CLEAR(self->it);
    forget_last(self);
    Py_CLEAR(self->registry);
    Py_CLEAR(self->source);
    Py_CLEAR(self->wait);
    Py_CLEAR(self->turn);
    Py_CLEAR(self->wait_kids);
    Py_CLEAR(self->turn_kids);
    Py_CLEAR(self->name);
    return 0;
}

static void iter_dealloc(IterObject *self) {
    PyObject_GC_UnTrack(self);
    iter_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyTypeObject IterType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "perfkit._speedups.IterCore",
    .tp_doc = "A timed iterator's fields and its compiled __next__.",
    .tp_basicsize = sizeof(IterObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .tp_new = PyType_GenericNew,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)iter_next,
    .tp_traverse = (traverseproc)iter_traverse,
    .tp_clear = (inquiry)iter_clear,
    .tp_dealloc = (destructor)iter_dealloc,
    .tp_members = iter_members,
    .tp_getset = iter_getset,
};

/* ---------------------------------------------------------------- module */

static int take(PyObject *kwds, const char *key, PyObject **slot) {
    PyObject *value = PyDict_GetItemString(kwds, key);
    if (value == NULL) return 0;
    Py_INCREF(value);
    Py_XSETREF(*slot, value);
    return 1;
}

static PyObject *configure(PyObject *module, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) != 0 || kwds == NULL) {
        PyErr_SetString(PyExc_TypeError, "configure() takes keyword arguments only");
        return NULL;
    }
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    static const char *known[] = {"switch", "cell_var", "registry_var", "running_tasks", "perf_counter",
                                  "section_enter", "section_exit", "iter_next", "iter_end", "drain_at", NULL};
    while (PyDict_Next(kwds, &pos, &key, &value)) {
        int ok = 0;
        for (int i = 0; known[i] != NULL; i++)
            if (PyUnicode_CompareWithASCIIString(key, known[i]) == 0) ok = 1;
        if (!ok) {
            PyErr_Format(PyExc_TypeError, "configure() got an unexpected keyword %R", key);
            return NULL;
        }
    }
    PyObject *sw = PyDict_GetItemString(kwds, "switch");
    if (sw != NULL && !PyObject_TypeCheck(sw, &SwitchType)) {
        PyErr_Format(PyExc_TypeError, "switch must be a perfkit._speedups.Switch, got %R", sw);
        return NULL;
    }
    PyObject *drain_at = PyDict_GetItemString(kwds, "drain_at");
    if (drain_at != NULL) {
        Py_ssize_t n = PyLong_AsSsize_t(drain_at);
        if (n < 0) {
            if (!PyErr_Occurred()) PyErr_Format(PyExc_ValueError, "drain_at must be >= 0, got %zd", n);
            return NULL;
        }
        g_drain_at = n;
    }
    take(kwds, "switch", &g_switch);
    take(kwds, "cell_var", &g_cell_var);
    take(kwds, "registry_var", &g_registry_var);
    take(kwds, "running_tasks", &g_running_tasks);
    take(kwds, "perf_counter", &g_perf_counter);
    take(kwds, "section_enter", &g_section_enter);
    take(kwds, "section_exit", &g_section_exit);
    take(kwds, "iter_next", &g_iter_next);
    take(kwds, "iter_end", &g_iter_end);
    g_ready = g_switch && g_cell_var && g_registry_var && g_running_tasks && g_perf_counter && g_section_enter
              && g_section_exit && g_iter_next && g_iter_end && g_drain_at >= 0;
    Py_RETURN_NONE;
}

static PyObject *ready(PyObject *module, PyObject *Py_UNUSED(ignored)) {
    return PyBool_FromLong(g_ready);
}

static PyMethodDef module_methods[] = {
    {"configure", (PyCFunction)(void (*)(void))configure, METH_VARARGS | METH_KEYWORDS,
     "Hand over perfkit's objects: the switch, the context variables, the fallbacks, DRAIN_AT."},
    {"ready", ready, METH_NOARGS, "Whether everything the fast paths read has been configured."},
    {NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    .m_name = "perfkit._speedups",
    .m_doc = "perfkit's compiled hot path (optional; see perfkit/_accel.py).",
    .m_size = -1,
    .m_methods = module_methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    g_str_drain = PyUnicode_InternFromString("drain");
    if (g_str_drain == NULL) return NULL;
    PyTypeObject *types[] = {&SwitchType, &CoreType, &TimedType, &SectionType, &LookupType, &IterType};
    const char *names[] = {"Switch", "RegistryCore", "TimedFunction", "SectionCore", "SectionLookup", "IterCore"};
    const int ntypes = (int)(sizeof(types) / sizeof(types[0]));
    for (int i = 0; i < ntypes; i++)
        if (PyType_Ready(types[i]) < 0) return NULL;
    if (PyType_Ready(&StepType) < 0) return NULL;
    for (int exit = 0; exit < 2; exit++) {
        PyObject *step = step_new(NULL, exit);
        if (step == NULL || PyDict_SetItemString(SectionType.tp_dict, exit ? "__exit__" : "__enter__", step) < 0) {
            Py_XDECREF(step);
            return NULL;
        }
        Py_DECREF(step);
    }
    PyType_Modified(&SectionType);
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    for (int i = 0; i < ntypes; i++) {
        Py_INCREF(types[i]);
        if (PyModule_AddObject(m, names[i], (PyObject *)types[i]) < 0) {
            Py_DECREF(types[i]);
            Py_DECREF(m);
            return NULL;
        }
    }
    return m;
}
