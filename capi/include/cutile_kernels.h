/* cutile_kernels.h: the C ABI of libcutile_kernels.so (the cutile-kernels-capi crate).
 *
 * Tensors are described, never copied: a device address, a rank of at most 5, extents and strides in
 * elements, and an element-type code. Every call queues its work on the given CUDA stream of the given
 * device (in the device's primary context, the one the CUDA runtime uses) and returns without waiting.
 * Tile, schedule and compile-option arguments are accepted for signature compatibility and ignored:
 * the library chooses its own configuration.
 */
#ifndef CUTILE_KERNELS_H
#define CUTILE_KERNELS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CUTILE_MAX_DIMS 5

/* Element-type codes. */
#define CUTILE_DTYPE_F32 0
#define CUTILE_DTYPE_F16 1
#define CUTILE_DTYPE_BF16 2
#define CUTILE_DTYPE_I32 3
#define CUTILE_DTYPE_I64 4

/* Return codes. */
#define CUTILE_OK 0
#define CUTILE_ERR_DTYPE (-2)        /* an element type no kernel takes */
#define CUTILE_ERR_LAUNCH (-3)       /* kernel lookup, load or launch failed */
#define CUTILE_ERR_DEVICE (-4)       /* no driver, bad device ordinal, or a driver call failed */
#define CUTILE_ERR_NULL (-5)         /* a null descriptor, or a null address for a non-empty tensor */
#define CUTILE_ERR_BAD_ARGUMENTS (-6) /* shapes, layouts or a case the library does not support */

typedef struct {
    uint64_t ptr;
    int32_t ndim;
    int64_t shape[CUTILE_MAX_DIMS];
    int64_t strides[CUTILE_MAX_DIMS];
    int32_t dtype;
} TensorDesc;

/* c = a @ b; a [m, k], b [k, n], c [m, n]. */
int32_t cutile_matmul(const TensorDesc *c, const TensorDesc *a, const TensorDesc *b, int32_t bm,
                      int32_t bn, int32_t bk, int32_t group_size_m, int32_t num_programs,
                      int32_t num_cta_in_cga, int32_t occupancy, int32_t persistent,
                      int32_t device_id, uint64_t raw_stream);

/* c[q] = op(a[q]) @ op(b[q]); op transposes the last two axes when trans_a / trans_b is nonzero. */
int32_t cutile_bmm(const TensorDesc *c, const TensorDesc *a, const TensorDesc *b, int32_t bm,
                   int32_t bn, int32_t bk, int32_t group_size_m, int32_t trans_a, int32_t trans_b,
                   int32_t persistent, int32_t num_cta_in_cga, int32_t occupancy,
                   int32_t num_programs, int32_t device_id, uint64_t raw_stream);

/* out [rows, h] = silu(inp[:, :h]) * inp[:, h:]; inp [rows, 2h]. */
int32_t cutile_silu_and_mul(const TensorDesc *out, const TensorDesc *inp, int32_t block_size,
                            int32_t num_cta_in_cga, int32_t occupancy, int32_t device_id,
                            uint64_t raw_stream);

/* c = silu(a) * b, all the same shape. */
int32_t cutile_swiglu(const TensorDesc *c, const TensorDesc *a, const TensorDesc *b,
                      int32_t tile_size, int32_t num_cta_in_cga, int32_t occupancy,
                      int32_t device_id, uint64_t raw_stream);

/* Attention with per-head sink logits (TileGym attention_sink): q/k/v/out [bs, heads, seq, head_dim]
 * bf16 or f16, sinks [heads] of the same type, start_q i32 (element 0 is the first query's position),
 * causal, bandwidth = sliding window in keys (0: none). tile_d, h, n_kv_ctx and query_group_size must
 * agree with the shapes; tile sizes, grid, CGA size and occupancy are ignored. Synchronous. */
int32_t cutile_attention_sink(const TensorDesc *out, const TensorDesc *q, const TensorDesc *k,
                              const TensorDesc *v, const TensorDesc *sinks,
                              const TensorDesc *start_q, float qk_scale, int32_t tile_d, int32_t h,
                              int32_t n_kv_ctx, int32_t tile_m, int32_t tile_n,
                              int32_t query_group_size, int32_t bandwidth, int32_t grid_x,
                              int32_t grid_y, int32_t num_cta_in_cga, int32_t occupancy,
                              int32_t device_id, uint64_t raw_stream);

#ifdef __cplusplus
}
#endif

#endif /* CUTILE_KERNELS_H */
