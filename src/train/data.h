/* data.h - training examples for LoRA fine-tuning, read from a JSONL file
 * and tokenized with the model's own tokenizer and chat template.
 *
 * One JSON object a line, in one of the shapes the HF / TRL trainers take:
 *   {"text": "..."}                               every token is a label
 *   {"prompt": "...", "completion": "..."}        the completion's tokens are the labels
 *   {"messages": [{"role": ..., "content": ...}]} the chat template renders the
 *                                                 conversation; the assistant turns'
 *                                                 tokens are the labels
 * A text and a completion end with the specials the tokenizer puts after a
 * text, or else its EOS, learnt (as TRL's SFTTrainer appends eos_token), so
 * a model learns to stop. A line's other keys (a dataset's other columns)
 * are ignored; blank lines are skipped; anything else is an error naming
 * the file, the line and what is wrong. */
#ifndef HEARTH_TRAIN_DATA_H
#define HEARTH_TRAIN_DATA_H

#include "core/status.h"
#include "tok/tok.h"

#include <stdint.h>

typedef struct {
    int32_t *tokens; /* [n] */
    uint8_t *label;  /* [n]: 1 where tokens[i] is predicted (from position i - 1) and counts in the loss;
                        label[0] = 0 always */
    int n;           /* 2 <= n <= max_len */
    int line;        /* the JSONL line it came from (1-based) */
} hearth_train_example;

typedef struct {
    hearth_train_example *ex;
    int n;
    int n_truncated; /* examples cut to max_len tokens */
    long n_labels;   /* label tokens over all examples */
} hearth_train_data;

/* Read and tokenize path. tok: the model's tokenizer; chat_template: the
 * model's template source (NULL when it has none: "messages" lines are then
 * an error). Examples longer than max_len tokens are cut to their first
 * max_len; an example with no label left is an error. */
hearth_status hearth_train_data_load(hearth_train_data *d, const char *path, const hearth_tokenizer *tok,
                                     const char *chat_template, int max_len, hearth_err *err);
void hearth_train_data_free(hearth_train_data *d);

/* Preference data (DPO, ORPO), one pair a line, in TRL's shapes:
 *   {"prompt": "...", "chosen": "...", "rejected": "..."}
 *       standard: each side is the example {"prompt", "completion"} would
 *       give with that side as the completion (closed by EOS, learnt)
 *   {"prompt": [messages], "chosen": [messages], "rejected": [messages]}
 *       conversational: each side is the prompt's messages then its own,
 *       rendered as a {"messages"} example; only that side's assistant
 *       messages (each with its end-of-turn) are labels, not those of the
 *       prompt. A side begins with an assistant message.
 *   {"chosen": [messages], "rejected": [messages]}
 *       conversational with an implicit prompt: two whole conversations
 *       whose first messages are the same; the messages from the first that
 *       differ are each side's response (it must begin with an assistant
 *       message), labelled as above.
 * ("tools" is taken as in a {"messages"} line; other keys are ignored.)
 * Refused, naming the file and line: a missing or mistyped side, mixed
 * shapes (a text prompt with message responses), an implicit prompt in text
 * ({"chosen", "rejected"} strings), an empty response, a pair whose sides
 * are the same tokens (within max_len, if cut) as it teaches nothing, and a
 * side left with no label by max_len. */

/* A preference pair: the same prompt with the chosen and the rejected response;
 * each example's labels are its response's tokens (and what closes it). */
typedef struct {
    hearth_train_example chosen, rejected;
    int line;
} hearth_train_pair;

typedef struct {
    hearth_train_pair *p;
    int n;
    int n_truncated; /* pairs of which one example was cut to max_len */
} hearth_train_prefs;

/* Read and tokenize path as preference pairs; tok, chat_template and
 * max_len as for hearth_train_data_load, each side cut to max_len on its own. */
hearth_status hearth_train_prefs_load(hearth_train_prefs *d, const char *path, const hearth_tokenizer *tok,
                                      const char *chat_template, int max_len, hearth_err *err);
void hearth_train_prefs_free(hearth_train_prefs *d);

#endif
