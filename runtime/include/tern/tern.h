/* SPDX-License-Identifier: MIT */
/* libtern C API. Opaque handles, status codes, nothing throws or aborts.
 *
 * Conventions for every function below, unless its comment says otherwise:
 * - Ownership: a handle returned through an `out` pointer belongs to the caller, who frees it with the matching
 *   *_free function (NULL is accepted there and does nothing). On failure *out is set to NULL. The library never
 *   keeps a pointer to caller memory after a call returns, except where a comment says so (tern_model_load_buffer
 *   given a 64-byte aligned buffer).
 *   Strings the library returns are owned by it and live as long as the object they came from.
 * - Threads: a tern_model is read-only after load and may be shared by sessions on any threads. A tern_session is
 *   used by one thread at a time (calls on different sessions may run concurrently); a forward, append, reset,
 *   save/load state or generator call that enters while another thread's call holds the session returns
 *   TERN_INVALID_ARGUMENT at once, its message in tern_last_error (the session's slot belongs to the running call).
 *   Functions without a handle (tern_version, tern_status_string, tern_last_error, ...) may be called from any
 *   thread.
 * - Errors: a call returns TERN_OK or a status saying why not, with a message: the tern_session_* calls given a
 *   session set the session's (tern_session_last_error; except the busy case above), the tern_generator_* calls
 *   given a generator the generator's (tern_generator_last_error), all others (tern_generator_create included) the
 *   calling thread's (tern_last_error). A NULL pointer where one is required gives TERN_INVALID_ARGUMENT with a
 *   message naming it ("tern_session_forward: ids is NULL"), in the thread's slot when it is the session or the
 *   generator itself. A failed call changes nothing the caller can observe unless its comment says so.
 * - Units: token counts and positions are tokens; sizes are bytes; times are nanoseconds.
 * - Options structs start with `size_t struct_size`, filled in by their *_init function, which is how the library
 *   knows which fields a caller built against an older header has: those fields it does not have take their
 *   defaults. Always call *_init before setting fields (docs/library.md, "ABI and versions"). */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <stddef.h>
#include <stdint.h>

/* TERN_API marks every function of the C API: the shared library is built with hidden visibility and exports these
 * alone (with a linker version script, runtime/tern.map.in), so a declaration without it is missing from
 * libtern.so (tests/abi/ checks that every function declared here is exported, and nothing else). Empty for
 * compilers without GCC's visibility attribute; an app may define it before including this header. */
#ifndef TERN_API
#if defined(__GNUC__) || defined(__clang__)
#define TERN_API __attribute__((visibility("default")))
#else
#define TERN_API
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. CMake reads it from here (project version, SONAME libtern.so.MAJOR, the package's
 * ternConfigVersion.cmake). A library with the same MAJOR and a MINOR at least this header's runs an app built
 * against it (docs/library.md, "ABI and versions"); tern_version() says which library an app actually loaded. */
#define TERN_VERSION_MAJOR 0
#define TERN_VERSION_MINOR 6
#define TERN_VERSION_PATCH 0

/* The library's version, "MAJOR.MINOR.PATCH". A static string; any thread. */
TERN_API const char* tern_version(void);

/* The CPU this process runs on, as cpuinfo reads it, for benchmark reports: the chip's name (on Arm, where Linux
 * rarely names the chip, also the main ID register), its cores and logical processors, and the vector features
 * that decide which kernels run, e.g. "Intel(R) Xeon(R) CPU @ 2.20GHz (1 core, 2 logical processors): sse4.2 avx
 * avx2 fma3 f16c" or "... (8 cores, 8 logical processors, MIDR 0x414fd0b1): neon fp16 dotprod". A static string;
 * any thread. */
TERN_API const char* tern_cpu_description(void);
/* The .tern format versions (tern_model_info.format_version) this library reads: tern_model_load rejects a file
 * outside [*min_version, *max_version] with TERN_INVALID_MODEL. Either pointer may be NULL. Any thread. */
TERN_API void tern_format_versions(uint32_t* min_version, uint32_t* max_version);

typedef struct tern_model tern_model;
typedef struct tern_session tern_session;

typedef enum {
  TERN_OK = 0,
  TERN_INVALID_ARGUMENT = 1,
  TERN_INVALID_MODEL = 2,
  TERN_UNSUPPORTED = 3,
  TERN_OUT_OF_MEMORY = 4,
  TERN_DEVICE_ERROR = 5,
  TERN_IO_ERROR = 6,
  /* An error inside the library, not in the model, the arguments or the device: a bug to report, with the
   * message from tern_last_error / tern_session_last_error. */
  TERN_INTERNAL_ERROR = 7,
  /* A generator under TERN_CONTEXT_STOP (tern_generator_options) has filled the session's sequence: the next token
   * cannot be fed. Not a failure of the library: start again with tern_generator_prompt, or use TERN_CONTEXT_SLIDE. */
  TERN_CONTEXT_FULL = 8,
  /* The app's abort callback (tern_session_set_callbacks) asked a forward or append to stop: the session was reset
   * (position 0) and takes the next call as usual. Not a failure of the library. */
  TERN_ABORTED = 9
} tern_status;

typedef enum { TERN_BACKEND_CPU = 0, TERN_BACKEND_VULKAN = 1, TERN_BACKEND_AUTO = 2 } tern_backend;

/* How a Vulkan session stores weights on the device (tern_session_options.weight_storage).
 * TERN_WEIGHT_STORAGE_AUTO (the default from tern_session_options_init): F16 where the device has
 * storageBuffer16BitAccess (the logits then differ from the float32 path by the weights' rounding, ~1e-3 relative
 * on the reference goldens), F32 where it does not; the CPU backend runs float32 without a notice. Set F32 for
 * logits that match the CPU path to float32 rounding.
 * TERN_WEIGHT_STORAGE_F32: as the file holds them (float32).
 * TERN_WEIGHT_STORAGE_F16: LINEAR weights and EMBEDDING tables are uploaded as IEEE float16 (converted on the host
 * at session creation, rounded to nearest even) and the shaders widen them to float32: compute, activations,
 * biases, state and every other op's weights stay float32. Those weights take half the device memory, and the
 * logits differ from the float32 path only by the weights' rounding to float16 (none for a checkpoint saved in
 * float16, such as the shipped kjv-byte model). Needs a device with storageBuffer16BitAccess (Vulkan 1.1 16-bit
 * storage): without it session creation fails with TERN_UNSUPPORTED naming the feature. TERN_BACKEND_CPU:
 * TERN_UNSUPPORTED (a Vulkan option); TERN_BACKEND_AUTO that falls back to the CPU runs float32 and says so in its
 * one-line notice. */
typedef enum {
  TERN_WEIGHT_STORAGE_F32 = 0,
  TERN_WEIGHT_STORAGE_F16 = 1,
  TERN_WEIGHT_STORAGE_AUTO = 2
} tern_weight_storage;

/* How a CPU session stores the activations it keeps for a whole call between parts of the model that run in row
 * blocks (tern_session_options.activation_storage): in Reformer, the two residual streams around each LSH layer,
 * [n, d] each, which bound its memory at long n.
 * TERN_ACTIVATION_STORAGE_F32: float32.
 * TERN_ACTIVATION_STORAGE_F16: those values are stored as IEEE float16 (half the bytes), widened to float32 a block
 * of rows at a time for the ops that read them and rounded back (to nearest even) after the ops that write them;
 * compute, weights, state and every other value stay float32. Results then differ from float32 by those roundings
 * (~1e-3 relative), and a stream value above 65504 becomes inf. Only such values change: a model without them runs
 * as with F32 (tern_session_plan shows the bytes). TERN_BACKEND_VULKAN: TERN_UNSUPPORTED (a CPU option);
 * TERN_BACKEND_AUTO that picks a Vulkan device runs float32 and says so in its one-line notice. */
typedef enum { TERN_ACTIVATION_STORAGE_F32 = 0, TERN_ACTIVATION_STORAGE_F16 = 1 } tern_activation_storage;

/* How a CPU session stores the keys and values of past tokens in the streaming state of its dense, sliding window,
 * chunked local, strided and fixed attention ops (tern_session_options.kv_storage).
 * TERN_KV_STORAGE_F32: float32.
 * TERN_KV_STORAGE_F16: keys and values are rounded to IEEE float16 (to nearest even) when a call computes them,
 * and every query attends to the rounded ones, its own call's tokens included: the state takes half the bytes
 * (tern_session_plan's state_bytes and a saved state say so), and results do not depend on how a sequence is cut
 * into calls. Queries, scores, softmax and sums stay float32, so the attention output differs from float32 by
 * that one rounding of each key and value (2^-11 relative per element; ~1e-3 relative on the logits of the test
 * models), and a key or value above 65504 becomes inf. Other attention kinds (adaptive span, Transformer-XL and
 * compressive memories, LSH, routing) keep float32 state under F16. A state saved under one kv_storage does not
 * load into a session of the other (TERN_INVALID_ARGUMENT naming both). TERN_BACKEND_VULKAN: TERN_UNSUPPORTED (a
 * CPU option); TERN_BACKEND_AUTO that picks a Vulkan device runs float32 and says so in its one-line notice. */
typedef enum { TERN_KV_STORAGE_F32 = 0, TERN_KV_STORAGE_F16 = 1 } tern_kv_storage;

/* Memory an app provides for a CPU session's large buffers (tern_session_options.allocator), e.g. from a pool, a
 * budgeted heap or pinned memory. allocate returns `size` bytes (size > 0) aligned to `alignment` (a power of two,
 * at least 64: the kernels' vector loads and the arena's places are 64-byte aligned; no more is assumed), or NULL
 * when it will not, and the session's creation then fails with TERN_OUT_OF_MEMORY naming the bytes asked. release
 * gets each block back, with the size it was asked for, when the session is freed (or when its creation fails);
 * never during a forward, append or generator call, which allocate nothing. Both are called on the thread of
 * tern_session_create or tern_session_free, with user_data. The session keeps a copy of the struct; user_data must
 * stay valid until the session is freed.
 * Through it go every buffer the CPU session's plan counts (tern_session_memory) except the packed weights:
 * the arena, the kernels' scratch and staging (arena_bytes), every op's streaming state (state_bytes: KV caches and
 * rings, Transformer-XL and compressive memories, LSH and routing caches, attention sinks) and the tables computed
 * at creation (counted in packed_weight_bytes: relative-position and adaptive-span tables, the sinks' rotation
 * table). Not through it: the packed copies of float32 weights (the rest of packed_weight_bytes: they belong to the
 * model and are shared by its sessions, so no one session's allocator can own them), small bookkeeping (per-op descriptions, vectors of a few
 * floats per head or column, thread pool, messages), temporaries freed before tern_session_create returns, the
 * model (tern_model_load maps its file; tern_model_load_buffer's copy), generators and samplers. A Vulkan session's
 * memory is the driver's: TERN_BACKEND_VULKAN with an allocator is TERN_UNSUPPORTED, and TERN_BACKEND_AUTO that
 * picks a Vulkan device does not call it and says so in its one-line notice. */
typedef struct {
  void* (*allocate)(void* user_data, size_t size, size_t alignment);
  void (*release)(void* user_data, void* ptr, size_t size);
  void* user_data;
} tern_allocator;

/* TERN_BACKEND_VULKAN runs every op as a compute shader on a Vulkan device (creation fails with TERN_UNSUPPORTED
 * naming the op when one has no shader yet, or when there is no loader or device). TERN_BACKEND_AUTO takes a Vulkan
 * GPU when there is one and the model runs on it, and otherwise the CPU, with a one-line notice on stderr saying
 * why; a CPU implementation of Vulkan (Mesa's lavapipe) does not count, the CPU path is faster on the same cores. */
typedef struct {
  size_t struct_size;   /* sizeof(tern_session_options), set by tern_session_options_init: 0 (a struct that was
                         * never initialised) or a size larger than this library's (a newer header) is rejected
                         * with TERN_INVALID_ARGUMENT */
  tern_backend backend; /* TERN_BACKEND_CPU by default */
  int threads;          /* 0: one per core while no other call or process holds the cores, else 1; N: always N */
  int64_t max_tokens;   /* tokens a session can hold (state capacity); 0: the model's max_context, or, for a
                         * model without one (max_context 0: Transformer-XL, ...), the largest max_tokens (at most
                         * 2^31) whose plan (state for max_tokens + arena for max_batch + tables computed at
                         * creation, then the exact total once weights are packed) fits memory_budget_bytes or,
                         * without a budget, half of the memory available at creation (MemAvailable of
                         * /proc/meminfo, physical memory where there is none; the other half is left to the app
                         * and the mapped weights), found by bisection; TERN_OUT_OF_MEMORY when not even 1 fits.
                         * tern_session_max_tokens and tern_session_context_note say what was taken and why. */
  int64_t max_batch;    /* most tokens in one forward/append call; 0: max_tokens, capped at the model's max_context,
                         * or at 4096 where max_tokens was fitted to memory (see max_tokens) */
  uint64_t memory_budget_bytes; /* 0: none. Most bytes the session may allocate (packed weights + arena + scratch +
                                 * state; weights mapped from the file are not counted; packed weights in full,
                                 * even where the CPU shares them with the model's other sessions): creation fails with
                                 * TERN_OUT_OF_MEMORY when the plan does not fit, before anything big is allocated,
                                 * with the planner's numbers (the bytes for max_tokens and max_batch, the budget) and
                                 * the largest max_tokens that would fit. Without a budget, a plan larger than the
                                 * machine's physical memory fails the same way. With max_tokens 0 on a model without
                                 * a context limit, max_tokens is fitted to it (see max_tokens). */
  int device;           /* Vulkan device. 0: the best one (discrete GPU > integrated > virtual > CPU implementation);
                         * N >= 1: the loader's device N-1 (what vulkaninfo lists as GPU N-1). Ignored on the CPU. */
  int64_t row_block_rows;       /* 0: each chain of row-wise ops picks its block (256..1024 rows, see
                                 * cpu/row_chains.h); otherwise every chain runs in blocks of this many rows */
  tern_weight_storage weight_storage; /* TERN_WEIGHT_STORAGE_AUTO by default; F16: Vulkan only, see above */
  tern_activation_storage activation_storage; /* TERN_ACTIVATION_STORAGE_F32 by default; F16: CPU only, see above */
  tern_kv_storage kv_storage; /* TERN_KV_STORAGE_F32 by default; F16: CPU only, see above */
  int forward_only;     /* 0 by default. 1: the session runs whole sequences (tern_session_forward, or a first
                         * tern_session_append) and never continues one, so state that only a later call reads is not
                         * kept: the LSH layers' generation cache (per layer max_tokens * heads * (2 * head_dim +
                         * hashes) floats), which on a 65,536-token Reformer is most of the session's memory, and
                         * the routing layers' (each cluster's best keys, bounded by the window). An
                         * append at a position > 0 is then TERN_UNSUPPORTED. Other values: TERN_INVALID_ARGUMENT. */
  /* Attention sinks (StreamingLLM, Xiao et al. 2023) for an endless stream in constant memory. 0 and 0 (default):
   * off. sink_window W > 0: every attention op keeps the keys and values of the first sink_tokens S tokens and of
   * the W most recent ones, as the reference code's evaluation loop does (streaming-llm's StartRecentKVCache with
   * the Llama pos_shift attention): keys are cached before their rotation; in every call the cached keys are rotated
   * by their index in the cache and each query by its own (the cache's length before the call plus its row); nothing
   * is evicted inside a call, and after each call the cache is cut back to the first S entries and the W most recent.
   * One new token so attends to up to S + W + 1 keys (itself included), and a call longer than S + W runs whole, as
   * dense attention, before the cut. Results depend on how a sequence is cut into calls (the session never splits
   * one). The state is S + W tokens (tern_session_plan), constant in the number of tokens, and the sequence limit
   * is 2^31 (tern_session_sequence_limit). Needs every attention op to be dense (grouped-query included) with rotary
   * positions (the Llama family): a model with learned absolute positions, or windowed or sparse attention, is
   * TERN_UNSUPPORTED naming the op. max_tokens must be 0 (the state holds S + W tokens); max_batch 0 means S + W,
   * capped at the model's max_context. A saved state carries S and W and loads only into a session with the same
   * ones. S < 0, W < 0, S > 0 with W = 0, or S + W above 2^31: TERN_INVALID_ARGUMENT. */
  int64_t sink_tokens;
  int64_t sink_window;
  /* NULL (default): the library's own allocator (aligned, with huge pages for large buffers on Linux). Otherwise the
   * app's, for the CPU session's large buffers (see tern_allocator above; copied at creation). Both functions must
   * be set: a NULL one is TERN_INVALID_ARGUMENT. */
  const tern_allocator* allocator;
} tern_session_options;

/* Where a session runs (tern_session_get_backend). Strings live as long as the session. */
typedef struct {
  tern_backend backend;     /* TERN_BACKEND_CPU or TERN_BACKEND_VULKAN, never AUTO */
  const char* device_name;  /* "CPU", or the Vulkan device's name, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)" */
  const char* device_type;  /* "CPU", or discrete GPU | integrated GPU | virtual GPU | CPU | other */
  const char* driver;       /* the Vulkan driver's name and version; on the CPU, the instruction set of Tern's own
                             * kernels, picked at run time: "kernels: baseline", "kernels: avx2" or "kernels: avx512"
                             * on x86-64 ("kernels: native" in a TERN_NATIVE build), followed by a note in parentheses
                             * where the environment variable TERN_CPU_ISA asked for one this CPU lacks */
} tern_backend_info;

/* What a session needs, from the planner, before any run. */
typedef struct {
  int64_t n_tokens;              /* the n this plan is for */
  uint64_t weight_bytes;         /* constants in the model file (mapped, not copied) */
  uint64_t packed_weight_bytes;  /* backend copies of weights this session uses, shared with the model's other
                                  * sessions on the same backend (and, on Vulkan, the same device): one copy per
                                  * model, freed with its last session. On the CPU, float32 matrices packed for
                                  * Tern's GEMM; on Vulkan, the device copies. Every session counts them, and so
                                  * does memory_budget_bytes (a conservative bound); plus tables computed at
                                  * creation */
  uint64_t arena_bytes;          /* activations and scratch for a call of n tokens */
  uint64_t state_bytes;          /* streaming state: KV caches, memories */
  uint64_t dense_attention_bytes;/* what a materialised n x n score matrix per head would take; UINT64_MAX when
                                  * that passes 2^64 - 1 bytes (state_bytes saturates the same way) */
  int64_t row_chains;            /* chains of row-wise ops run in row blocks (their inner values need block rows) */
  int64_t row_block_rows;        /* the largest block those chains use, in rows */
} tern_memory_plan;

typedef struct {
  const char* architecture;
  const char* description;
  int64_t vocab_size;
  int vocab_is_bytes;
  int64_t max_context; /* 0: unbounded */
  int64_t n_ops;
  int64_t n_tensors;
  uint32_t format_version;
} tern_model_info;

/* Fills *options with the defaults (every field as documented above) and sets struct_size. NULL does nothing. */
TERN_API void tern_session_options_init(tern_session_options* options);

/* A short English name for a status ("invalid argument"). A static string; unknown values give "unknown status". */
TERN_API const char* tern_status_string(tern_status status);
/* Message of the last failed call on this thread that has no session to hold it (tern_model_load*,
 * tern_model_get_info, tern_session_create, calls given a NULL session). "" when there was none. Owned by the
 * library, valid until the next failing call on this thread. */
TERN_API const char* tern_last_error(void);

/* Log messages: notices the library has for the user that are not errors (e.g. TERN_BACKEND_AUTO falling back to
 * the CPU, and why) and Vulkan validation reports (with TERN_VULKAN_VALIDATION=1). By default they are written to
 * stderr, one line each, prefixed "tern: "; a callback replaces that. */
typedef enum { TERN_LOG_ERROR = 0, TERN_LOG_WARNING = 1, TERN_LOG_INFO = 2 } tern_log_level;
/* message: one line, no trailing newline, valid only during the call. Called on the thread of the library call
 * that logs (several threads may call it at once when sessions run concurrently); it must not call back into the
 * library. */
typedef void (*tern_log_callback)(tern_log_level level, const char* message, void* user_data);
/* Sets the process-wide log callback and the user_data passed to it; callback NULL restores the default (stderr).
 * To silence the library, pass a callback that does nothing. Set it before creating sessions: a call that logs
 * concurrently with this one sees the old or the new callback. */
TERN_API void tern_set_log_callback(tern_log_callback callback, void* user_data);

/* Maps the .tern file at path read-only (the file must not change while the model lives) and checks all of it:
 * FlatBuffers verification, format version (tern_format_versions), every tensor's bounds and alignment, every
 * op's inputs, attributes and weights. *out: free with tern_model_free. Errors: TERN_IO_ERROR (cannot open or
 * map, naming the path), TERN_INVALID_MODEL (the first check that failed), TERN_OUT_OF_MEMORY. */
TERN_API tern_status tern_model_load(const char* path, tern_model** out);
/* As tern_model_load, from size bytes at data. Tensors are read in place, at the 64-byte offsets the file gives
 * them: a 64-byte aligned buffer is used as it is, without a copy, and the caller keeps it alive and unchanged until
 * tern_model_free; any other buffer is copied into aligned memory the model owns (size bytes more; a buffer of a
 * file the app read itself is rarely aligned), and the caller may free it when the call returns.
 * tern_model_copied_bytes says which happened. Errors as tern_model_load, and TERN_OUT_OF_MEMORY when the copy
 * cannot be allocated. */
TERN_API tern_status tern_model_load_buffer(const void* data, size_t size, tern_model** out);
/* Fills *out. Its strings live as long as the model. */
TERN_API tern_status tern_model_get_info(const tern_model* model, tern_model_info* out);
/* Tokens per call the model was trained and evaluated with, where its file records them (Transformer-XL's
 * tgt_len, a compressive model's segment_length): a model with a memory gives different outputs for the same
 * tokens cut into calls of another length, so a caller streaming a sequence feeds it this many at a time to
 * reproduce the evaluation. 0 when none is recorded, or for a NULL model. Any thread. */
TERN_API int64_t tern_model_segment_length(const tern_model* model);
/* Frees the model. Every session created from it must have been freed first. */
TERN_API void tern_model_free(tern_model* model);

/* Creates a session: plans every buffer for max_batch tokens per call and max_tokens of state, allocates it all
 * (no allocation happens in later calls) and prepares the backend. options NULL: the defaults. The model must
 * outlive the session. *out: free with tern_session_free. Errors: TERN_INVALID_ARGUMENT (an option out of range,
 * naming the field), TERN_UNSUPPORTED (the backend cannot run an op of the model, naming it; an option the backend
 * does not have; on Vulkan, routing attention outside a forward_only session), TERN_OUT_OF_MEMORY (the plan exceeds
 * memory_budget_bytes or physical memory, with the planner's numbers), TERN_DEVICE_ERROR (Vulkan). */
TERN_API tern_status tern_session_create(const tern_model* model, const tern_session_options* options,
                                         tern_session** out);
/* Frees the session and everything it allocated. NULL does nothing. */
TERN_API void tern_session_free(tern_session* session);

/* Planner numbers for a call of n_tokens (1..2^31) tokens, without running or allocating. */
TERN_API tern_status tern_session_plan(const tern_session* session, int64_t n_tokens, tern_memory_plan* out);

/* What the session has allocated: arena (for max_batch tokens), state (for max_tokens) and packed weights.
 * n_tokens is max_batch; dense_attention_bytes is for max_tokens. Constant for the session's life. */
TERN_API tern_status tern_session_memory(const tern_session* session, tern_memory_plan* out);

/* Where the session runs. The strings live as long as the session. */
TERN_API tern_status tern_session_get_backend(const tern_session* session, tern_backend_info* out);

/* Per-op timing: off by default. On the CPU every op's run is timed with a steady clock; on Vulkan each op's
 * dispatches are timed on the device with timestamp queries (devices without timestamps report zeros). */
typedef struct {
  const char* name;  /* the op's name in the model, e.g. "layers.0.attn" (lives as long as the model) */
  const char* kind;  /* the op code, e.g. "ATTENTION" (a static string) */
  int64_t calls;
  uint64_t total_ns;
} tern_op_profile;
/* Turns per-op timing on (enabled != 0) or off, and clears the counters. */
TERN_API tern_status tern_session_set_profiling(tern_session* session, int enabled);
/* Copies up to capacity entries (one per op, in graph order) to out (NULL when capacity is 0) and sets *count to
 * the number of ops, so a first call with capacity 0 sizes the array. */
TERN_API tern_status tern_session_get_profile(const tern_session* session, tern_op_profile* out, size_t capacity,
                                              size_t* count);
/* The floating-point operations of each op's profiled calls (a multiply-add counts two), from the op's shapes, in
 * the order of tern_session_get_profile: what the op must compute, not a kernel's masked or padded work. LINEAR
 * counts 2 * n * in * out; ATTENTION of the windowed kinds (dense, sliding, chunked, strided, fixed) 4 * head_dim
 * per (query, key) pair its pattern shows; every other op 0. Copies up to capacity entries to flops (NULL when
 * capacity is 0) and sets *count to the number of ops. */
TERN_API tern_status tern_session_get_profile_flops(const tern_session* session, uint64_t* flops, size_t capacity,
                                                    size_t* count);

/* Device dispatches: how many compute dispatches a call of n_tokens tokens after `position` held ones runs on the
 * session's device, without running it (a backend's launch count, as per-token overhead on a GPU grows with it).
 * A Vulkan session replays one command buffer recorded at creation whose workgroup counts are set per call: a
 * recorded dispatch with no workgroups in this call (one that runs only in a first call, or only at a later position)
 * does not count. *total: all of them; per_op: up to capacity entries, the dispatches of each op in the order of
 * tern_session_get_profile (NULL when capacity is 0); *count: the number of ops. A CPU session has none: 0 everywhere.
 * Errors: TERN_INVALID_ARGUMENT (NULL count or total; n_tokens outside 1..max_batch; a position before 0, with
 * n_tokens past the sequence limit, or after 0 in a forward_only session), naming the numbers. */
TERN_API tern_status tern_session_count_dispatches(const tern_session* session, int64_t n_tokens, int64_t position,
                                                   uint64_t* per_op, size_t capacity, size_t* count, uint64_t* total);

/* Resets the state, then runs ids[0..n) as one sequence (1 <= n <= max_batch; each id in [0, vocab_size)).
 * logits: [n, vocab_size] floats, written row by row (row i: the next-token logits after ids[0..i]). Errors:
 * TERN_INVALID_ARGUMENT (n, an id out of range, NULL logits), TERN_DEVICE_ERROR. On error the state is reset. */
TERN_API tern_status tern_session_forward(tern_session* session, const int32_t* ids, int64_t n, float* logits);
/* Continues the sequence held in the state with ids[0..n) (1 <= n <= max_batch, position + n <= max_tokens).
 * logits: [n, vocab_size], or NULL when only the state should advance. Errors as tern_session_forward, and
 * TERN_UNSUPPORTED when position > 0 in a forward_only session (the only kind of Vulkan session a model with routing
 * attention gets: tern_session_create). LSH attention continues a sequence as
 * Hugging Face's cached generation does, on both backends: each position of a later call attends, as if alone and
 * in order, to what the first call and the positions since left in its cache (the first call's sort is never
 * redone); routing attention runs each position alone as row t of the layer over positions 0..t (ops/routing.h). A call
 * rejected for n, max_batch or max_tokens leaves the state as it was; one that fails while running (an id out of
 * range, a device error) or is unsupported resets it: a half-applied call would leave some caches ahead of
 * others. */
TERN_API tern_status tern_session_append(tern_session* session, const int32_t* ids, int64_t n, float* logits);
/* The width d of the model's last hidden state: the rows its output head reads, after the final norm, which is what
 * Hugging Face's base models (LlamaModel, GPT2Model, ...) return as last_hidden_state. It is the input of the head
 * LINEAR (through any soft-cap or log-softmax after it) or of Transformer-XL's adaptive softmax. 0 for a model
 * whose output is made otherwise, with the reason in tern_session_last_error (TERN_UNSUPPORTED); NULL session: 0,
 * message in tern_last_error. */
TERN_API int64_t tern_session_hidden_size(const tern_session* session);
/* As tern_session_forward (resets the state, then runs ids[0..n) as one sequence, 1 <= n <= max_batch), but gives
 * the last hidden state instead of the logits: hidden [n, d] floats (row i: position i; d =
 * tern_session_hidden_size), and pooled [d], the mean of those n rows (summed in double precision). Either may be
 * NULL, not both. The head is not run (on a large vocabulary, the biggest matrix of the model), and nothing is
 * allocated: the value lives in the arena planned at creation. The session then holds the sequence, as after
 * tern_session_forward, and tern_session_append continues it. Callbacks (tern_session_set_callbacks) apply as to a
 * forward. Errors as tern_session_forward, and TERN_UNSUPPORTED for a model without a hidden state
 * (tern_session_hidden_size 0) or a session on Vulkan (the CPU backend reads the value back; the Vulkan one does
 * not yet), naming the reason. On error the state is reset. */
TERN_API tern_status tern_session_forward_hidden(tern_session* session, const int32_t* ids, int64_t n, float* hidden,
                                                 float* pooled);
/* Forgets every token seen: position 0, caches and memories cleared. */
TERN_API tern_status tern_session_reset(tern_session* session);
/* Saves the streaming state (every op's KV cache, ring or memory, and the position) so that an app can pause a long
 * stream and resume it later, in this session or in a new one of the same model and options. With buf NULL, sets
 * *size to the bytes needed; otherwise writes them to buf (of *size bytes, TERN_INVALID_ARGUMENT if too small) and
 * sets *size to the bytes written. The blob carries the model's fingerprint, its sizes and a checksum. */
TERN_API tern_status tern_session_save_state(const tern_session* session, void* buf, size_t* size);
/* Replaces the state with one saved by tern_session_save_state, on either backend: the CPU and Vulkan backends save
 * the same bytes, so a state saved on one continues on the other. A blob from another model, from a session whose
 * state has other sizes (e.g. another max_tokens for dense attention), truncated, corrupt or in a layout this
 * runtime does not read is rejected with TERN_INVALID_ARGUMENT and a message, and the session is left as it was
 * (every check runs before anything changes; only a device error while copying, TERN_DEVICE_ERROR, can leave a
 * Vulkan session's state undefined, to be reset). buf is not kept. */
TERN_API tern_status tern_session_load_state(tern_session* session, const void* buf, size_t size);
/* Tokens held in the state now (0 after create, reset or a failed forward). NULL session: 0. */
TERN_API int64_t tern_session_position(const tern_session* session);
/* The model's vocabulary size: the width of a logits row. NULL session: 0. */
TERN_API int64_t tern_session_vocab_size(const tern_session* session);
/* Message of the last failed call on this session ("" when none failed), owned by the session and valid until its
 * next failing call or tern_session_free. NULL session: "null session". */
TERN_API const char* tern_session_last_error(const tern_session* session);
/* Tokens of state the session was created for: the app's max_tokens, or the one the session chose (see
 * tern_session_options.max_tokens). NULL session: 0. Constant for the session's life. */
TERN_API int64_t tern_session_max_tokens(const tern_session* session);
/* One line saying what max_tokens the session took and why, e.g. "max_tokens 4096: set by the app",
 * "max_tokens 1024: the model's context", or, on a model without a context limit, "max_tokens 123456: the largest
 * whose plan (... bytes, calls of up to 4096 tokens) fits half of MemAvailable (... of ... bytes) (the model has no
 * context limit)". Owned by the session, valid until tern_session_free; NULL session: "null session". */
TERN_API const char* tern_session_context_note(const tern_session* session);

/* Abort and progress for long calls (tern_session_forward and _append, and the generator calls that feed the
 * session). A call of more than TERN_CALLBACK_ROWS tokens runs in parts of at most that many rows, one after another
 * (the same rows as one call: logits agree with an undivided call to float rounding); before each part the abort
 * callback is asked, and after each the progress callback is told the rows done. Calls that cannot be divided (a
 * model with an op that runs a call as one unit: Transformer-XL and compressive memories, LSH and routing attention,
 * rotary positions with dynamic scaling; attention sinks; forward_only sessions) run whole: on the CPU the abort
 * callback is asked between ops, on Vulkan before the call only, and progress is told once, at the end. Both run on
 * the thread of the call and must not call into the session.
 * abort_callback: nonzero stops the call, which returns TERN_ABORTED after resetting the session (position 0, as a
 * call that fails while running); the next call works as on a fresh session.
 * progress_callback: rows_done of rows_total, the tokens of that session call, increasing; rows_done == rows_total
 * last. A generator call that feeds more than max_batch tokens makes several session calls, each reported alone. */
#define TERN_CALLBACK_ROWS 256
typedef int (*tern_abort_callback)(void* user_data);
typedef void (*tern_progress_callback)(int64_t rows_done, int64_t rows_total, void* user_data);
/* Sets both callbacks and the user_data passed to them (either callback NULL: none; both NULL: calls run undivided,
 * as before). Not during a call of the session: the same one-call-at-a-time rule as a forward. */
TERN_API tern_status tern_session_set_callbacks(tern_session* session, tern_abort_callback abort_callback,
                                                tern_progress_callback progress_callback, void* user_data);

/* ---------------------------------------------------------------------------------------------------------------
 * Generation: sampling, a generator that feeds a session token by token, and text <-> ids through the model's tokenizer.
 *
 * Options structs of this section begin with `size_t struct_size`, which their *_init function sets to the struct's
 * size in the tern.h the app was built with. The library reads the fields that fit in struct_size and gives the
 * others their defaults, so an app built against an older tern.h keeps working; struct_size 0 (an uninitialised
 * struct) or larger than the library's struct (a newer tern.h than the library) is TERN_INVALID_ARGUMENT. A NULL
 * options pointer means every default. Fields are only ever appended.
 * ------------------------------------------------------------------------------------------------------------- */

/* Tokens the sequence in a session can hold: every tern_session_append past it fails, naming the limit.
 * It is the session's max_tokens when some op limits it: a state that grows with every token (dense, strided and
 * fixed attention; a sliding or chunked window, or an adaptive span, wider than max_tokens), or positions read from a
 * table (learned or axial position embeddings, whose rows the session binds up to max_tokens). Where every op's state
 * is bounded and no op limits positions (sliding or chunked windows within max_tokens, adaptive span, Transformer-XL
 * and compressive memories, sinusoidal or relative positions), the session continues past max_tokens, with the state
 * it allocated for max_tokens, up to 2^31 tokens: that number is returned. 0 for a NULL session. Constant for the
 * session's life; thread rules as every session call. */
TERN_API int64_t tern_session_sequence_limit(const tern_session* session);

/* --- Sampler: logits -> one token id ---------------------------------------------------------------------------
 * The steps, always in this order:
 *   1. repetition penalty: each distinct id among the last repetition_last_n tokens of the history has its logit
 *      divided by repetition_penalty when it is positive and multiplied by it otherwise (CTRL; Hugging Face's
 *      RepetitionPenaltyLogitsProcessor); every other logit is left as it is.
 *   2. temperature 0 is greedy decoding: the largest logit after step 1, the lowest id among equal ones. Steps 3-7
 *      do not run and the random state does not advance.
 *   3. top-k: the top_k largest logits stay, ties to the lower id.
 *   4. temperature: p_i = exp((logit_i - max) / temperature) over the tokens left (double precision).
 *   5. top-p (nucleus): taking tokens by p descending (ties to the lower id), the fewest whose p sum to at least
 *      top_p of the mass left stay; at least one.
 *   6. min-p: the tokens with p_i >= min_p * (the largest p_i) stay.
 *   7. draw: u in [0, 1) from the top 53 bits of the sampler's xoshiro256** generator (seeded through splitmix64),
 *      and the first token left, in increasing id, whose running sum of p exceeds u times the sum of p left.
 * The PRNG and the arithmetic are the library's own, so a seed gives the same tokens on every platform, compiler
 * and thread count (for the same logits). */
typedef struct tern_sampler tern_sampler;

typedef struct {
  size_t struct_size;       /* sizeof(tern_sampler_options), set by tern_sampler_options_init */
  float temperature;        /* >= 0; 0: greedy (argmax). Default 1 */
  int32_t top_k;            /* >= 0; 0: off (every token). Default 0 */
  float top_p;              /* in (0, 1]; 1: off. Default 1 */
  float min_p;              /* in [0, 1]; 0: off. Default 0 */
  float repetition_penalty; /* > 0; 1: off; > 1 discourages repeats. Default 1 */
  int32_t repetition_last_n;/* >= 0: the penalty looks at the last N tokens of the history; 0: at all of it.
                             * Default 64 */
  uint64_t seed;            /* the PRNG's seed; any value. Default 0 */
} tern_sampler_options;

/* Sets every field to its default (above) and struct_size to sizeof(tern_sampler_options). NULL: nothing. */
TERN_API void tern_sampler_options_init(tern_sampler_options* options);
/* Creates a sampler with a copy of the options (NULL: the defaults). A field out of range (NaN, a negative
 * temperature, top_p outside (0, 1], ...) is TERN_INVALID_ARGUMENT with a message naming the field
 * (tern_last_error). *out is set to NULL on failure. Free with tern_sampler_free. */
TERN_API tern_status tern_sampler_create(const tern_sampler_options* options, tern_sampler** out);
/* NULL: nothing. */
TERN_API void tern_sampler_free(tern_sampler* sampler);
/* Picks one token from logits [vocab] (float32, e.g. one row of tern_session_forward's output) and writes it to
 * *token. history [n_history] holds the tokens so far (oldest first) for the repetition penalty; it may be NULL when
 * n_history is 0. Neither array is kept. Errors (TERN_INVALID_ARGUMENT, message in tern_last_error, *token left
 * alone): NULL sampler, logits or token; vocab outside [1, 2^31); a NaN or +inf logit; every logit -inf; a history id
 * outside [0, vocab). The first call for a vocab size allocates the sampler's scratch (about 17 bytes a token);
 * later calls allocate nothing. A sampler is used by one thread at a time; samplers are independent of each other. */
TERN_API tern_status tern_sampler_sample(tern_sampler* sampler, const float* logits, int64_t vocab, const int32_t* history,
                                int64_t n_history, int32_t* token);
/* Restarts the sampler's random sequence from `seed`, as tern_sampler_create with that seed did. TERN_INVALID_ARGUMENT
 * for a NULL sampler. */
TERN_API tern_status tern_sampler_set_seed(tern_sampler* sampler, uint64_t seed);

/* --- Generator: a sequence grown token by token in a session ---------------------------------------------------
 * A generator borrows a session (which must outlive it) and owns the sequence in it: the prompt, then one sampled
 * token per tern_generator_next. One generator is bound to a session at a time (tern_generator_create refuses a
 * second until tern_generator_free unbinds the first). While it is bound, feed the session only through it: a
 * tern_session_forward, _append, _reset or _load_state made directly on the session, even one that leaves it at the
 * position the generator expects, makes the generator's next call fail with TERN_INVALID_ARGUMENT saying so;
 * tern_generator_prompt (or tern_generator_restore) starts over.
 *
 * A token that tern_generator_next returns is fed to the session at the start of the next call (tern_generator_next
 * or tern_generator_append), so no logits are computed for the last token of a generation that the caller stops.
 *
 * When the sequence reaches tern_session_sequence_limit (the session's max_tokens for models with dense attention or
 * learned positions, such as examples/models/kjv-byte) the context policy decides:
 *   TERN_CONTEXT_STOP   the call that would feed past the limit returns TERN_CONTEXT_FULL and changes nothing; the
 *                       generator stays full until the next tern_generator_prompt.
 *   TERN_CONTEXT_SLIDE  the session is reset and the last keep_tokens tokens of the history are fed again (prefill),
 *                       then generation goes on: the next logits are those of a fresh session fed those tokens.
 *   TERN_CONTEXT_SINKS  the session keeps attention sinks (tern_session_options.sink_window > 0; otherwise
 *                       tern_generator_create fails with TERN_INVALID_ARGUMENT): it never fills, every token costs
 *                       the same, nothing is fed again.
 *   TERN_CONTEXT_SHIFT  as SLIDE, without the prefill: the cache entries of the last keep_tokens tokens move to the
 *                       start of the cache and their keys are rotated to their new positions in place (llama.cpp's
 *                       context shift), O(keep_tokens) rotations instead of a prefill; then the new tokens are fed
 *                       after them (when they do not fit after keep_tokens, fewer are kept; when they do not fit at
 *                       all, SLIDE's refill). An approximation of SLIDE (the kept tokens' deeper-layer keys and
 *                       values were computed at their old positions), never chosen in its place. Needs every
 *                       attention op to be dense with static rotary positions (the Llama family without dynamic or
 *                       LongRoPE scaling): TERN_UNSUPPORTED at tern_generator_create otherwise, naming the op.
 * Models whose state is bounded (sliding or chunked windows, adaptive span, Transformer-XL or compressive memory,
 * with sinusoidal or relative positions) reach no such limit below 2^31 tokens: they continue without a prefill.
 *
 * Stopping: tern_generator_next stops the generation (tern_generator_stop_reason) when the token it returns
 *   is an end token of the model (tern_model_is_end_token: the EOS id and the checkpoint's further end ids) unless
 *   the options say ignore_eos, completes one of the app's stop strings (tern_generator_set_stop_strings), or is
 *   the max_new_tokens-th since the last prompt or append; it returns TERN_CONTEXT_FULL under TERN_CONTEXT_STOP when
 *   the sequence is full. The stopping token is returned and is in the history, like any other (so the text of a
 *   stop string is in the tokens returned: an app that shows text cuts it off). Until the next tern_generator_prompt
 *   or tern_generator_append, a stopped generator's tern_generator_next returns TERN_INVALID_ARGUMENT saying why it
 *   stopped (TERN_CONTEXT_FULL for a full one, as before); tern_generator_append feeds the stopping token first, so
 *   a chat continues after an end token as a template expects.
 *
 * Threads: a generator, its session and the sampler passed to it are used by one thread at a time; generators on
 * different sessions run on any threads at once. */
typedef struct tern_generator tern_generator;

typedef enum {
  TERN_CONTEXT_STOP = 0,
  TERN_CONTEXT_SLIDE = 1,
  TERN_CONTEXT_SINKS = 2,
  TERN_CONTEXT_SHIFT = 3
} tern_context_policy;

typedef struct {
  size_t struct_size;                 /* sizeof(tern_generator_options), set by tern_generator_options_init */
  tern_context_policy context_policy; /* TERN_CONTEXT_SLIDE by default */
  int64_t keep_tokens;                /* SLIDE and SHIFT: tokens kept when the sequence is full, in [0, the sequence
                                       * limit); 0 (default): half the sequence limit */
  int64_t history_tokens;             /* the most tokens the history keeps (tern_generator_history, the repetition
                                       * penalty's view), the oldest dropped first. 0 (default): every token since
                                       * the prompt under STOP, SLIDE and SHIFT; the last 4096 under SINKS, whose
                                       * stream never ends and whose memory stays constant. Otherwise at least 1,
                                       * and under STOP, SLIDE and SHIFT at least the sequence limit (a refill feeds
                                       * up to that many again). The history then holds between history_tokens and
                                       * twice as many (it is cut in one move when it reaches twice). */
  int64_t max_new_tokens;             /* >= 0; a generation stops (TERN_STOP_LENGTH) at the max_new_tokens-th token
                                       * tern_generator_next returns after a prompt or append. 0 (default): never */
  int ignore_eos;                     /* 0 (default): an end token stops the generation (TERN_STOP_EOS); 1: it does
                                       * not, generation goes on through it. Other values: TERN_INVALID_ARGUMENT */
} tern_generator_options;

/* Sets the defaults above and struct_size. NULL: nothing. */
TERN_API void tern_generator_options_init(tern_generator_options* options);
/* Binds a new generator to `session` (borrowed: the session must outlive the generator; one generator per session at
 * a time). Options NULL: the defaults. Errors (tern_last_error): NULL session or out, bad struct_size, an unknown
 * policy, keep_tokens negative or not below tern_session_sequence_limit (TERN_INVALID_ARGUMENT). Allocates the
 * generator's logits row [vocab]. Free with tern_generator_free. */
TERN_API tern_status tern_generator_create(tern_session* session, const tern_generator_options* options, tern_generator** out);
/* Frees the generator; the session and its state are left as they are. NULL: nothing. */
TERN_API void tern_generator_free(tern_generator* generator);
/* Resets the session and feeds it the prompt ids [n] (n >= 1), computing the logits the first token is sampled from.
 * A prompt longer than the sequence limit keeps its last tern_session_sequence_limit tokens; *kept (may be NULL)
 * says how many tokens were fed. The whole prompt goes into the history. Errors: those of tern_session_append (ids
 * outside the vocabulary, ...), with the message in tern_generator_last_error; the generator then holds no sequence. */
TERN_API tern_status tern_generator_prompt(tern_generator* generator, const int32_t* ids, int64_t n, int64_t* kept);
/* Feeds ids [n] (n >= 1) after the sequence, e.g. a user's turn; the context policy applies (SLIDE keeps the last
 * max(keep_tokens, n) tokens, at most the limit; STOP returns TERN_CONTEXT_FULL and feeds nothing when they do not
 * fit). Needs a prompt first. */
TERN_API tern_status tern_generator_append(tern_generator* generator, const int32_t* ids, int64_t n);
/* Feeds the token the previous call returned (if any, under the context policy), then samples the next one with
 * `sampler` from the current logits, the repetition penalty looking at the generator's history, and writes it to
 * *token (and to the history). Errors: no prompt yet, a session changed behind the generator's back, NULL arguments
 * (TERN_INVALID_ARGUMENT); TERN_CONTEXT_FULL under STOP; any error of the session's append. On any error *token is
 * -1 and nothing was sampled. Messages: tern_generator_last_error. */
TERN_API tern_status tern_generator_next(tern_generator* generator, tern_sampler* sampler, int32_t* token);
/* The logits [vocab] the next token will be sampled from: after tern_generator_prompt or _append, those of the last
 * token fed; after tern_generator_next, those the returned token was drawn from (the token itself is fed lazily).
 * *vocab (may be NULL) gets the row's length. Owned by the generator, valid until its next call; NULL before a
 * prompt. */
TERN_API const float* tern_generator_logits(const tern_generator* generator, int64_t* vocab);
/* The history: every id of the last prompt (all of it, also a part that did not fit), then every id appended or
 * generated since, oldest first; under history_tokens (tern_generator_options), only the most recent of them. *n
 * gets its length. Owned by the generator, valid until its next call. */
TERN_API const int32_t* tern_generator_history(const tern_generator* generator, int64_t* n);
/* How many times the context policy made room since the last prompt: TERN_CONTEXT_SLIDE's refills and
 * TERN_CONTEXT_SHIFT's shifts (0 under SINKS, which never needs to). */
TERN_API int64_t tern_generator_slides(const tern_generator* generator);
/* Message of the last failed call on this generator ("" if none). Owned by the generator. */
TERN_API const char* tern_generator_last_error(const tern_generator* generator);

/* Why the last generation stopped (see "Stopping" above). */
typedef enum {
  TERN_STOP_NONE = 0,         /* not stopped: tern_generator_next goes on */
  TERN_STOP_EOS = 1,          /* the last token returned is an end token of the model */
  TERN_STOP_STRING = 2,       /* the text of the tokens generated since the last prompt or append now contains a stop
                               * string, ending in the last token's text */
  TERN_STOP_LENGTH = 3,       /* max_new_tokens tokens were generated */
  TERN_STOP_CONTEXT_FULL = 4  /* TERN_CONTEXT_STOP: the sequence is full (tern_generator_next returned
                               * TERN_CONTEXT_FULL) */
} tern_stop_reason;
/* The reason the generation stopped, TERN_STOP_NONE while it goes on (and after a prompt or append). stop_string
 * (may be NULL) gets the index, in the list given to tern_generator_set_stop_strings, of the string matched under
 * TERN_STOP_STRING (the one whose match ends first, the lowest index among equals), -1 otherwise. NULL generator:
 * TERN_STOP_NONE. */
TERN_API tern_stop_reason tern_generator_stop_reason(const tern_generator* generator, int64_t* stop_string);
/* Sets the stop strings: n NUL-terminated strings (copied; n 0 clears them), each at least one byte. They are
 * matched on the text of the tokens generated since the last prompt or append (not the prompt's), as
 * tern_token_to_text gives each token's text, concatenated: a string split over several tokens is found, a string
 * that began before the last prompt or append is not. Takes effect for the tokens generated after this call.
 * Errors: NULL generator, strings NULL with n > 0, an empty or NULL string, n < 0 (TERN_INVALID_ARGUMENT); a model
 * whose file carries no tokenizer (TERN_UNSUPPORTED: a stop string needs token text). */
TERN_API tern_status tern_generator_set_stop_strings(tern_generator* generator, const char* const* strings, int64_t n);

/* Saves the generator, the session it feeds and the random state of `sampler` as one self-checking blob, so that an
 * app can stop and resume a generation later, in this process or another: tern_generator_restore into a generator
 * on a session of the same model and session options, with a sampler of the same options, continues with exactly
 * the tokens the uninterrupted generator would have given. The blob holds the session state
 * (tern_session_save_state), the history, the token returned but not yet fed, the logits the next token is drawn
 * from, the stop state (reason, tokens generated, the text a stop string may continue), the generator's options and
 * the sampler's options and PRNG state, under a header, a version and a checksum. With buf NULL sets *size to the
 * bytes needed; otherwise writes them to buf (of *size bytes; TERN_INVALID_ARGUMENT if too small) and sets *size to
 * the bytes written. The stop strings are not saved: they are the app's settings, as the options are. Errors: NULL
 * generator, sampler or size (TERN_INVALID_ARGUMENT); those of tern_session_save_state. */
TERN_API tern_status tern_generator_save(const tern_generator* generator, const tern_sampler* sampler, void* buf,
                                         size_t* size);
/* Replaces the generator's sequence, its session's state and the sampler's PRNG state with a blob of
 * tern_generator_save. A blob that is truncated, corrupt, of another version, saved with other generator or sampler
 * options, from another model or session configuration, or whose values are out of range (a token outside the
 * vocabulary, a NaN or +inf logit, a history longer than its options allow, ...) is refused with
 * TERN_INVALID_ARGUMENT (TERN_UNSUPPORTED for another version) and a message, before anything changes (only a
 * device error while a Vulkan session's state is copied can leave it undefined, as in tern_session_load_state).
 * buf is not kept. */
TERN_API tern_status tern_generator_restore(tern_generator* generator, tern_sampler* sampler, const void* buf,
                                            size_t size);

/* --- Text <-> token ids -------------------------------------------------------------------------------------------
 * Through the tokenizer the model file carries (tern-convert writes it; schema/README.md, "Tokenizers"):
 *   "bytes"                  token b is the byte b; ids >= 256 are special tokens with no text;
 *   "bytes+K"                token b + K is the byte b (HF Reformer enwik8: K = 2); other ids are special;
 *   "sentencepiece-unigram", "sentencepiece-bpe"
 *                            the ids libsentencepiece's Encode gives for the text (same normalization, byte
 *                            fallback and unknown pieces), and its DecodeIds for the way back;
 *   "hf-bpe", "hf-unigram"   a Hugging Face tokenizer.json (BPE or Unigram model): the ids and text of the
 *                            tokenizers library 0.23 (docs/tokenizers.md lists the components it may use);
 *   "words", "characters", "bytes-decimal"
 *                            a list of symbols from a tern_vocab.json (Transformer-XL's and adaptive-span's word and
 *                            character lists): id i is symbol i, a line end is the end-of-sequence id.
 * A model whose file carries no tokenizer (ids only) gets TERN_UNSUPPORTED saying so. No special token is added
 * by tern_tokenize: a model that wants a BOS first is given it by the caller (tern_model_special_token), or asks
 * tern_tokenize_with for TERN_TOKENIZE_ADD_SPECIAL.
 * Any thread (the model is read-only). Messages: tern_last_error. */

/* The tokenizer's name as above, "" when the file carries none (or model is NULL). Lives as long as the model. */
TERN_API const char* tern_model_tokenizer(const tern_model* model);

typedef enum { TERN_TOKEN_BOS = 0, TERN_TOKEN_EOS = 1, TERN_TOKEN_UNK = 2, TERN_TOKEN_PAD = 3 } tern_special_token;
/* The id of a special token, or -1 where the model has none (or carries no tokenizer). */
TERN_API int32_t tern_model_special_token(const tern_model* model, tern_special_token which);
/* 1 when id ends a generation: the end-of-sequence id, or one of the further end ids the checkpoint lists
 * (generation_config.json's eos_token_id list); 0 otherwise (and for a model without a tokenizer). */
TERN_API int tern_model_is_end_token(const tern_model* model, int32_t id);
/* 1 when the checkpoint's tokenizer starts every text with the BOS token (Llama's add_bos_token): a caller starting
 * a sequence from text puts tern_model_special_token(model, TERN_TOKEN_BOS) first; 0 otherwise. */
TERN_API int tern_model_adds_bos(const tern_model* model);

/* Writes the ids of text [len bytes, any bytes, not NUL-terminated] to ids [capacity] and sets *n to the number of
 * ids the text needs. Size query: ids NULL and capacity 0 set *n and return TERN_OK. capacity below *n:
 * TERN_INVALID_ARGUMENT after *n is set, nothing written. Byte vocabularies: a byte whose id is outside the
 * vocabulary (a byte vocabulary smaller than 256) is TERN_INVALID_ARGUMENT naming its offset. SentencePiece
 * accepts any bytes (invalid UTF-8 becomes U+FFFD as libsentencepiece does). tokenizer.json ("hf-bpe",
 * "hf-unigram"): tokenizers' encode(text, add_special_tokens=False), the text of added tokens (special ones too)
 * becoming their ids. len above 2^31 - 1: TERN_INVALID_ARGUMENT. */
TERN_API tern_status tern_tokenize(const tern_model* model, const char* text, size_t len, int32_t* ids, int64_t capacity,
                          int64_t* n);
/* tern_tokenize_with's flags (bits; 0 is tern_tokenize). */
enum {
  /* The ids a model's tokenizer puts around a text: tokenizer.json, its post-processor's (tokenizers'
   * add_special_tokens=True: Llama's <s> first, Qwen's none); the other kinds, the BOS id when tern_model_adds_bos. */
  TERN_TOKENIZE_ADD_SPECIAL = 1u << 0,
  /* tokenizer.json: the text of special added tokens ("<|im_end|>", "<s>") is encoded as ordinary text, not as their
   * ids, so that untrusted text cannot inject control tokens; non-special added tokens are still split out. The
   * other kinds never read special tokens out of text: no change there. */
  TERN_TOKENIZE_SPECIALS_AS_TEXT = 1u << 1
};
/* tern_tokenize with flags (TERN_TOKENIZE_*); unknown bits: TERN_INVALID_ARGUMENT. */
TERN_API tern_status tern_tokenize_with(const tern_model* model, const char* text, size_t len, uint32_t flags,
                                        int32_t* ids, int64_t capacity, int64_t* n);
/* Writes the text token id adds after other tokens to buf [capacity] (not NUL-terminated) and sets *len to its
 * length in bytes: 1 for a byte, 0 for a special token; for SentencePiece the piece with U+2581 as a space (a
 * word-initial piece begins with one), a byte piece <0xNN> as that byte; tokenizer.json: the token through the
 * decoder chain as a token that follows others (a ByteLevel token's bytes, <0xNN> as that byte, the Metaspace
 * character as a space), an added token's content, "" for a special one. A byte may be part of a UTF-8 character:
 * a streaming caller holds an incomplete tail back (tern.hpp's Utf8Stream). Streaming the pieces of a sequence
 * gives tern_detokenize's text but for the leading space of the first word. Size query: buf NULL and capacity 0.
 * capacity below *len: TERN_INVALID_ARGUMENT after *len is set. An id outside [0, vocab_size): TERN_INVALID_ARGUMENT. */
TERN_API tern_status tern_token_to_text(const tern_model* model, int32_t id, char* buf, size_t capacity, size_t* len);
/* Writes the text of the sequence ids [n] to buf [capacity] and sets *len, as tern_token_to_text does for one id
 * (SentencePiece: libsentencepiece's DecodeIds, without the space its dummy prefix adds in front; byte pieces that
 * make no valid UTF-8 become U+FFFD; tokenizer.json: tokenizers' decode(ids, skip_special_tokens=False), special
 * tokens' text included). Size query: buf NULL and capacity 0. An id outside [0, vocab_size): TERN_INVALID_ARGUMENT
 * naming its index. */
TERN_API tern_status tern_detokenize(const tern_model* model, const int32_t* ids, int64_t n, char* buf, size_t capacity,
                            size_t* len);

/* The bytes tern_model_load_buffer copied the model into because its buffer was not 64-byte aligned (the model owns
 * the copy; the caller's buffer is not read after the load); 0 when the model reads the caller's buffer or its
 * mapped file in place, and for a NULL model. Any thread. */
TERN_API uint64_t tern_model_copied_bytes(const tern_model* model);

#ifdef __cplusplus
}
#endif

#endif /* TERN_TERN_H */
