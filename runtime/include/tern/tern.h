/* libtern C API. Opaque handles, status codes, nothing throws or aborts.
 *
 * Thread safety: a tern_model is read-only after load and may be shared by
 * sessions on any threads. A tern_session is used by one thread at a time. */
#ifndef TERN_TERN_H
#define TERN_TERN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this header. CMake reads it from here (project version, SONAME libtern.so.MAJOR, the package's
 * ternConfigVersion.cmake). A library with the same MAJOR and a MINOR at least this header's runs an app built
 * against it (README, "ABI and versions"); tern_version() says which library an app actually loaded. */
#define TERN_VERSION_MAJOR 0
#define TERN_VERSION_MINOR 2
#define TERN_VERSION_PATCH 0

/* The library's version, "MAJOR.MINOR.PATCH". A static string; any thread. */
const char* tern_version(void);
/* The .tern format versions (tern_model_info.format_version) this library reads: tern_model_load rejects a file
 * outside [*min_version, *max_version] with TERN_INVALID_MODEL. Either pointer may be NULL. Any thread. */
void tern_format_versions(uint32_t* min_version, uint32_t* max_version);

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
  TERN_INTERNAL_ERROR = 7
} tern_status;

typedef enum { TERN_BACKEND_CPU = 0, TERN_BACKEND_VULKAN = 1, TERN_BACKEND_AUTO = 2 } tern_backend;

/* How a Vulkan session stores weights on the device (tern_session_options.weight_storage).
 * TERN_WEIGHT_STORAGE_F32: as the file holds them (float32).
 * TERN_WEIGHT_STORAGE_F16: LINEAR weights and EMBEDDING tables are uploaded as IEEE float16 (converted on the host
 * at session creation, rounded to nearest even) and the shaders widen them to float32: compute, activations,
 * biases, state and every other op's weights stay float32. Those weights take half the device memory, and the
 * logits differ from the float32 path only by the weights' rounding to float16 (none for a checkpoint saved in
 * float16, such as the shipped kjv-byte model). Needs a device with storageBuffer16BitAccess (Vulkan 1.1 16-bit
 * storage): without it session creation fails with TERN_UNSUPPORTED naming the feature. TERN_BACKEND_CPU:
 * TERN_UNSUPPORTED (a Vulkan option); TERN_BACKEND_AUTO that falls back to the CPU runs float32 and says so in its
 * one-line notice. */
typedef enum { TERN_WEIGHT_STORAGE_F32 = 0, TERN_WEIGHT_STORAGE_F16 = 1 } tern_weight_storage;

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

/* TERN_BACKEND_VULKAN runs every op as a compute shader on a Vulkan device (creation fails with TERN_UNSUPPORTED
 * naming the op when one has no shader yet, or when there is no loader or device). TERN_BACKEND_AUTO takes a Vulkan
 * GPU when there is one and the model runs on it, and otherwise the CPU, with a one-line notice on stderr saying
 * why; a CPU implementation of Vulkan (Mesa's lavapipe) does not count, the CPU path is faster on the same cores. */
typedef struct {
  tern_backend backend; /* TERN_BACKEND_CPU by default */
  int threads;          /* 0: one per hardware thread */
  int64_t max_tokens;   /* tokens a session can hold (state capacity); 0: the model's max_context */
  int64_t max_batch;    /* most tokens in one forward/append call; 0: max_tokens, capped at the model's max_context */
  uint64_t memory_budget_bytes; /* 0: none. Most bytes the session may allocate (packed weights + arena + scratch +
                                 * state; weights mapped from the file are not counted): creation fails with
                                 * TERN_OUT_OF_MEMORY and the planner's numbers when the plan does not fit. Without a
                                 * budget, a plan larger than the machine's physical memory fails the same way. */
  int device;           /* Vulkan device. 0: the best one (discrete GPU > integrated > virtual > CPU implementation);
                         * N >= 1: the loader's device N-1 (what vulkaninfo lists as GPU N-1). Ignored on the CPU. */
  int64_t row_block_rows;       /* 0: each chain of row-wise ops picks its block (256..1024 rows, see
                                 * cpu/row_chains.h); otherwise every chain runs in blocks of this many rows */
  tern_weight_storage weight_storage; /* TERN_WEIGHT_STORAGE_F32 by default; F16: Vulkan only, see above */
  tern_activation_storage activation_storage; /* TERN_ACTIVATION_STORAGE_F32 by default; F16: CPU only, see above */
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
  uint64_t packed_weight_bytes;  /* backend copies of weights (e.g. XNNPACK packing) */
  uint64_t arena_bytes;          /* activations and scratch for a call of n tokens */
  uint64_t state_bytes;          /* streaming state: KV caches, memories */
  uint64_t dense_attention_bytes;/* what a materialised n x n score matrix per head would take */
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

void tern_session_options_init(tern_session_options* options);

const char* tern_status_string(tern_status status);
/* Message of the last failed call on this thread (model load, session create). */
const char* tern_last_error(void);

tern_status tern_model_load(const char* path, tern_model** out);
/* Loads from memory the caller keeps alive and unchanged until tern_model_free. */
tern_status tern_model_load_buffer(const void* data, size_t size, tern_model** out);
tern_status tern_model_get_info(const tern_model* model, tern_model_info* out);
void tern_model_free(tern_model* model);

tern_status tern_session_create(const tern_model* model, const tern_session_options* options,
                                tern_session** out);
void tern_session_free(tern_session* session);

/* Planner numbers for a call of n tokens, without running. */
tern_status tern_session_plan(const tern_session* session, int64_t n_tokens, tern_memory_plan* out);

/* What the session has allocated: arena (for max_batch tokens), state (for max_tokens) and packed weights.
 * n_tokens is max_batch; dense_attention_bytes is for max_tokens. Constant for the session's life. */
tern_status tern_session_memory(const tern_session* session, tern_memory_plan* out);

tern_status tern_session_get_backend(const tern_session* session, tern_backend_info* out);

/* Per-op timing: off by default. On the CPU every op's run is timed with a steady clock; on Vulkan each op's
 * dispatches are timed on the device with timestamp queries (devices without timestamps report zeros). */
typedef struct {
  const char* name;  /* the op's name in the model, e.g. "layers.0.attn" */
  const char* kind;  /* the op code, e.g. "ATTENTION" */
  int64_t calls;
  uint64_t total_ns;
} tern_op_profile;
tern_status tern_session_set_profiling(tern_session* session, int enabled); /* also clears the counters */
/* Copies up to capacity entries (one per op, in graph order) and sets *count to the number of ops. */
tern_status tern_session_get_profile(const tern_session* session, tern_op_profile* out, size_t capacity, size_t* count);

/* Resets the state, then runs ids[0..n) as one sequence. logits: [n, vocab]. */
tern_status tern_session_forward(tern_session* session, const int32_t* ids, int64_t n, float* logits);
/* Continues the sequence held in the state. logits: [n, vocab], may be NULL. */
tern_status tern_session_append(tern_session* session, const int32_t* ids, int64_t n, float* logits);
/* Forgets every token seen. */
tern_status tern_session_reset(tern_session* session);
/* Saves the streaming state (every op's KV cache, ring or memory, and the position) so that an app can pause a long
 * stream and resume it later, in this session or in a new one of the same model and options. With buf NULL, sets
 * *size to the bytes needed; otherwise writes them to buf (of *size bytes, TERN_INVALID_ARGUMENT if too small) and
 * sets *size to the bytes written. The blob carries the model's fingerprint, its sizes and a checksum. */
tern_status tern_session_save_state(const tern_session* session, void* buf, size_t* size);
/* Replaces the state with one saved by tern_session_save_state, on either backend: the CPU and Vulkan backends save
 * the same bytes, so a state saved on one continues on the other. A blob from another model, from a session whose
 * state has other sizes (e.g. another max_tokens for dense attention), truncated, corrupt or in a layout this
 * runtime does not read is rejected with TERN_INVALID_ARGUMENT and a message, and the session is left as it was
 * (every check runs before anything changes; only a device error while copying, TERN_DEVICE_ERROR, can leave a
 * Vulkan session's state undefined, to be reset). */
tern_status tern_session_load_state(tern_session* session, const void* buf, size_t size);
/* Tokens held in the state now. */
int64_t tern_session_position(const tern_session* session);
int64_t tern_session_vocab_size(const tern_session* session);
/* Message of the last failed call on this session. */
const char* tern_session_last_error(const tern_session* session);

#ifdef __cplusplus
}
#endif

#endif /* TERN_TERN_H */
