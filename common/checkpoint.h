/* checkpoint.h — a Hugging Face safetensors checkpoint folder, single-file or sharded.
 *
 * With model.safetensors.index.json: every shard named in weight_map must pass the path-safety check
 * and exist; each shard's header is parsed strictly (safetensors.h); every tensor of weight_map must be
 * in the shard it names, and every tensor of a shard must be listed for that shard. Without an index:
 * exactly one *.safetensors file in the folder. Errors name the file and the tensor at fault.
 *
 * Tensors are looked up by name; data is reached through read-only mmaps of the shards (made on first
 * use), so no full host copy is needed. */
#ifndef LLMR_CHECKPOINT_H
#define LLMR_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "common/safetensors.h"

typedef struct llmr_checkpoint llmr_checkpoint; /* opaque */

/* Opens the checkpoint in dir. Returns 0, or -1 with the cause in err. */
int llmr_checkpoint_open(const char *dir, llmr_checkpoint **out, char *err, size_t err_size);
void llmr_checkpoint_destroy(llmr_checkpoint *ck);

size_t llmr_checkpoint_shard_count(const llmr_checkpoint *ck);
const char *llmr_checkpoint_shard_name(const llmr_checkpoint *ck, size_t i);   /* file name, relative */
llmr_safetensors *llmr_checkpoint_shard(const llmr_checkpoint *ck, size_t i);
size_t llmr_checkpoint_tensor_count(const llmr_checkpoint *ck);

/* Finds a tensor by name; *shard_out (optional) receives its shard index. NULL if absent. */
const llmr_st_tensor *llmr_checkpoint_find(const llmr_checkpoint *ck, const char *name, size_t *shard_out);

/* Pointer to the tensor's bytes (mmapped). NULL with a message if absent or unmappable. */
const void *llmr_checkpoint_data(llmr_checkpoint *ck, const char *name, const llmr_st_tensor **tensor_out,
                                 char *err, size_t err_size);

/* Convenience: finds name and checks dtype and shape (ndim dims). Returns the tensor, or NULL with a
 * message such as "model.layers.3.mlp.router.weight: expected BF16 [32, 2880], found F32 [32, 2880]"
 * or "tensor model.norm.weight is missing". */
const llmr_st_tensor *llmr_checkpoint_expect(const llmr_checkpoint *ck, const char *name, llmr_st_dtype dtype,
                                             int ndim, const uint64_t *shape, char *err, size_t err_size);

#endif
