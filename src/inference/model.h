// A loaded model: device, weights, KV cache, scratch, tokenizer and the decode dispatch table
// (built once). Prefill, single-step and chain decode, evaluation logits and a generation session
// with stats. A session reuses the cached prefix it shares with the last one, or with a
// conversation saved in the prompt cache (docs/adr/0018-prompt-reuse.md). One Model is not
// thread-safe; separate Models are independent.
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/arch_descriptor.h"
#include "core/chip_config.h"
#include "core/device.h"
#include "core/dispatch_table.h"
#include "core/kv_cache.h"
#include "core/model_config.h"
#include "core/model_weights.h"
#include "core/scratch.h"
#include "core/table_builder.h"
#include "inference/memory_plan.h"
#include "inference/prompt_cache.h"
#include "inference/sampler.h"
#include "tokenizer/tokenizer.h"
#include "weights/hf_checkpoint.h"
#include "weights/weight_provider.h"

namespace akunu {

// The clock of a session's timings (GenerationStats), and milliseconds since a time point of it.
using SessionClock = std::chrono::steady_clock;
double ms_since(SessionClock::time_point t0);

struct LoadOptions {
    std::string backend = "auto";
    int context_length = 0;  // 0: the model's own, capped at kDefaultContextCap (memory_plan.h)
    int threads = 0;         // 0: one per hardware thread
    KVCacheDType kv_cache_dtype = KVCacheDType::F16;
    // Host memory for the KV caches of recent conversations (the prompt cache); 0: none, < 0: a
    // full context's worth (the KV cache's bytes and its tokens).
    int64_t prompt_cache_bytes = -1;
    // Makes the device instead of create_device(backend, threads) when set: for tests that run a
    // model on a device no build exposes by name (tests/metal_shim/: the Metal kernels on CPU threads).
    std::function<std::unique_ptr<Device>()> make_device;

    MemoryRequest memory_request() const { return MemoryRequest{context_length, kv_cache_dtype, prompt_cache_bytes}; }
};

struct GenerationStats {
    int prompt_tokens = 0;     // the whole prompt
    int cached_tokens = 0;     // of them, reused from the KV cache or the prompt cache, not prefilled
    int generated_tokens = 0;  // returned to the caller (end-of-generation tokens excluded)
    int decode_steps = 0;      // tokens run through the decode table (a chain may run past the end)
    double prefill_ms = 0;  // the prompt's time to the first token: reuse, then the prefill of the rest
    double decode_ms = 0;
    // The tokens prefilled (not those reused) per second of prefill_ms.
    double prefill_tokens_per_sec() const {
        return prefill_ms > 0 ? (prompt_tokens - cached_tokens) * 1000.0 / prefill_ms : 0;
    }
    double decode_tokens_per_sec() const { return decode_ms > 0 ? decode_steps * 1000.0 / decode_ms : 0; }
};

class Model {
public:
    // Loads a model: its memory plan first (inference/memory_plan.h), then, if it fits, the weights,
    // KV cache and scratch it planned. OutOfMemoryError when it does not fit, before any of them is
    // allocated.
    static std::unique_ptr<Model> load(const std::string &path, const LoadOptions &options);  // GGUF
    // A Hugging Face SafeTensors / MLX checkpoint read by the Python layer; no tokenizer.
    static std::unique_ptr<Model> load(const HFCheckpoint &checkpoint, const LoadOptions &options);
    // The memory plan load() would make for these options, allocating nothing: fits() or not.
    static MemoryPlan plan(const std::string &path, const LoadOptions &options);
    static MemoryPlan plan(const HFCheckpoint &checkpoint, const LoadOptions &options);
    ~Model();

    const ModelConfig &config() const { return config_; }
    const ArchDescriptor &arch() const { return arch_; }
    const ChipConfig &chip() const { return chip_; }
    const Device &device() const { return *device_; }
    const WeightProvider &weights() const { return *provider_; }
    // The GGUF's tokenizer; null for Hugging Face checkpoints (their tokenizer runs in Python).
    std::shared_ptr<const Tokenizer> tokenizer() const { return tokenizer_; }
    const DispatchTable &decode_table() const { return decode_table_; }
    int table_builds() const { return table_builds_; }
    // The row counts of the forced-run tables kept so far (feed), ascending.
    std::vector<int> forced_run_tables() const;
    int context_length() const { return kv_.max_length; }
    int position() const { return kv_.length(); }
    // The token at each cached position (what the next session may reuse).
    const std::vector<int32_t> &cached_tokens() const { return kv_.tokens(); }
    // How many cached positions a next prompt could keep: all of them, or where decode steps round
    // otherwise than prefill (ChipConfig::decode_rows_match_prefill) those of the last prompt.
    int reusable_length() const {
        return chip_.decode_rows_match_prefill ? kv_.length() : std::min(prompt_end_, kv_.length());
    }
    const PromptCache &prompt_cache() const { return prompt_cache_; }
    size_t kv_cache_bytes() const { return kv_.bytes(); }
    // What the loader allocated for the weights (owned buffers and the file's bytes the device reads
    // in place) and for the scratch buffers: the memory plan's numbers, as allocated.
    size_t weight_bytes() const;
    size_t scratch_bytes() const { return scratch_.allocated_bytes(); }
    const MemoryPlan &memory_plan() const { return plan_; }
    KVCacheDType kv_cache_dtype() const { return kv_.dtype; }
    std::string chat_template() const;

    // --- low level: the KV cache grows with each call until reset() ----------------------
    // Empties the KV cache and the prompt cache.
    void reset();
    // Runs `tokens` through the model at the current position; returns the argmax next token.
    int32_t prefill(const std::vector<int32_t> &tokens);
    // Feeds one token through the decode table; returns the argmax next token.
    int32_t decode_step(int32_t token);
    // Feeds `token` and then each argmax in turn, `count` tokens in chained replays of the table;
    // returns the `count` produced tokens.
    std::vector<int32_t> chain_decode(int32_t token, int count);
    // Feeds one token like decode_step, timing every command of the decode table (ms each).
    std::vector<double> profile_decode_step(int32_t token);
    // Teacher-forced logits of the positions first_row.. of `tokens`: [n - first_row, vocab]
    // row-major. The earlier rows are only prefilled, or kept where the live cache holds them
    // already (its common prefix with `tokens`); the live cache's other rows are discarded (the
    // prompt cache's entries stay).
    std::vector<float> evaluate_logits(const std::vector<int32_t> &tokens, size_t first_row = 0);
    // The logits the last forward pass left for its last position, [vocab]: exactly the model's
    // after a greedy pass (a grammar's mask and the sampler's repetition penalty change them in place).
    std::vector<float> last_logits() const;

    // --- generation session -------------------------------------------------------------
    // Keeps the cached prefix shared with the prompt (see start_session), prefills the rest and
    // picks the first token; the session makes at most
    // sampling.max_tokens tokens. Throws ContextOverflowError when the prompt does not fit,
    // std::invalid_argument for bad arguments.
    void begin_generation(const std::vector<int32_t> &prompt, const SamplingConfig &sampling);
    // The next tokens of the session (at most one chain-decode chunk); empty once finished.
    // End-of-generation tokens end the session and are not returned.
    std::vector<int32_t> next_tokens();
    bool generation_finished() const { return gen_.finished; }
    // "stop" (end-of-generation token), "length" (max_tokens or context) or "" while running.
    const std::string &finish_reason() const { return gen_.finish_reason; }
    const GenerationStats &stats() const { return stats_; }

    // --- grammar-constrained session (inference/constrained_generation.cpp) ---------------
    // The grammar lives with the caller, which computes each token's allowed-token mask, so the
    // session runs one token per submission: feed() starts the forward pass of the tokens just
    // chosen (returning at once on an asynchronous device), the caller computes the next mask
    // meanwhile, and choose_token() applies it on the device before the argmax or the sampler.
    //
    //   begin_constrained(prompt, sampling);
    //   loop: t = choose_token(mask); ... feed({t, forced...});
    //   end_constrained(generated, "stop" | "length");
    //
    // Keeps the cached prefix shared with the prompt and prefills the rest (its last logits wait
    // for choose_token).
    void begin_constrained(const std::vector<int32_t> &prompt, const SamplingConfig &sampling);
    // The next token: the argmax, or the session's sampling rule, over the tokens whose bit is set in
    // `mask` ((vocab + 31) / 32 words, bit i % 32 of word i / 32 for token i).
    int32_t choose_token(const uint32_t *mask, size_t words);
    // Appends `tokens` (the chosen token and / or those the grammar forces) to the session and
    // starts their forward pass: up to ChipConfig::max_forced_decode_steps as chained replays of
    // the decode table, up to max_forced_table_rows as a kept prefill table of that many rows
    // (forced_run_tables), more as a prefill pass built per call. choose_token then reads the last
    // token's logits.
    void feed(const std::vector<int32_t> &tokens);
    // Ends the session: `generated` tokens were handed out; `reason` "stop" or "length".
    void end_constrained(int generated, const std::string &reason);
    size_t token_mask_words() const;

private:
    Model() = default;
    // The device and the weights (a GGUF file, or a checkpoint's), then read_model.
    static std::unique_ptr<Model> open(const std::string &path, const LoadOptions &options);
    static std::unique_ptr<Model> open(const HFCheckpoint &checkpoint, const LoadOptions &options);
    // Config, architecture and chip config from the open weights, and the checks that need no
    // allocation (head_dim, kv_cache_dtype).
    void read_model(const LoadOptions &options);
    void finish_load(const LoadOptions &options);  // everything after read_model
    void upload_weights();
    bool is_eog(int32_t id) const;  // the tokenizer's, or the checkpoint's end-of-generation ids
    ModelContext context() const;
    void check_tokens(const std::vector<int32_t> &tokens) const;
    void check_room(int n_new) const;
    void check_prompt_fits(size_t prompt_tokens) const;
    int32_t read_token_slot(int slot) const;
    // Runs `tokens` at the current position through forward tables of at most `max_rows` rows,
    // calling after_chunk(first_token_index, rows) once each chunk has finished.
    // `sample`: each chunk's last token is drawn by the sampling rule instead of argmax.
    void forward_in_chunks(const std::vector<int32_t> &tokens, int max_rows, bool all_logits, bool sample,
                           const std::function<void(size_t first, int rows)> &after_chunk);
    // What every session starts with: checks, fresh stats, the sampling and history, and the cache
    // holding the longest prefix of the prompt it can reuse (stats_.cached_tokens of them). Returns
    // the prompt tokens left to run.
    std::vector<int32_t> start_session(const std::vector<int32_t> &prompt, const SamplingConfig &sampling);
    // --- prompt reuse (inference/prompt_reuse.cpp) ---
    // How many positions of a cache holding `cached` (the first `prefilled` written by prefill
    // passes) a session for `prompt` can keep.
    int reusable_prefix(const std::vector<int32_t> &cached, int prefilled, const std::vector<int32_t> &prompt) const;
    // Rolls the cache back to its reusable prefix of `prompt`, first trading it for a saved
    // conversation that shares more and saving it if most of it would be lost; returns the length.
    int reuse_cached_prefix(const std::vector<int32_t> &prompt);
    // The prompt's tokens left to run through the cache; returns the token after them, drawn by the
    // session's sampling.
    int32_t prefill_for_session(const std::vector<int32_t> &rest);
    // Writes the session's sampling rule and latest tokens into scratch.sampling.
    void write_sampling_state();
    // One replay of `table` (argmax or sampler last) for n <= the token slots tokens, starting by
    // feeding `token`: returns the n tokens the chain produced.
    std::vector<int32_t> replay_chain(const DispatchTable &table, int32_t token, int n);
    std::vector<int32_t> decode_greedy_chunk(int n);
    std::vector<int32_t> decode_sampled_chunk(int n);

    std::unique_ptr<Device> device_;
    std::unique_ptr<WeightProvider> provider_;
    std::shared_ptr<const Tokenizer> tokenizer_;
    std::vector<bool> eog_;  // per token id, when there is no tokenizer
    ModelConfig config_;
    ArchDescriptor arch_;
    ChipConfig chip_;
    ModelWeights weights_;
    MemoryPlan plan_;
    KVCache kv_;
    // Cached positions [0, prompt_end_) hold the last prompt run (a session's or prefill()'s), written
    // by prefill passes (or kept from earlier ones); the rest were generated after it. A prompt that departs from the cache before prompt_end_ starts
    // another conversation (or edits this one), and the prompt cache keeps this one.
    int prompt_end_ = 0;
    PromptCache prompt_cache_;
    ScratchBuffers scratch_;
    DispatchTable decode_table_;
    DispatchTable sampled_decode_table_;  // decode_table_ ending in the sampler instead of argmax
    DispatchTable masked_argmax_table_;   // a grammar's mask, then decode_table_'s argmax
    DispatchTable masked_sample_table_;   // a grammar's mask, then the sampler
    // Forced runs' prefill tables by row count, built on first use (feed). A map: a table never
    // moves, so a backend may key cached work (CUDA graphs) on its commands' address.
    std::map<int, DispatchTable> forced_run_tables_;
    int table_builds_ = 0;

    struct Session {
        int generated = 0;
        bool finished = true;
        bool first_pending = false;  // the prefill's token has not been returned yet
        int32_t next_input = 0;      // produced, not yet fed into the cache
        std::string finish_reason;
        SamplingConfig sampling;
        std::vector<int32_t> history;  // prompt + output, for the penalties
        size_t prompt_length = 0;      // the history's first prompt_length tokens are the prompt
        bool constrained = false;      // begin_constrained's session
        bool logits_pending = false;   // constrained: the cache's last logits await choose_token
        SessionClock::time_point decode_start;
    } gen_;
    GenerationStats stats_;
};

}  // namespace akunu
