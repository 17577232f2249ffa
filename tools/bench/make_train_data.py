#!/usr/bin/env python3
"""make_train_data.py - a deterministic chat SFT data set for the LoRA training benchmark.

Writes N lines of {"messages": [{"role": "user", ...}, {"role": "assistant", ...}]}:
a short question and an answer of about --words words (English-ish sentences
drawn from a fixed small word list with a seeded RNG), the same file for hearth
and for the PyTorch peer (tools/bench/peer_train_torch.py). With SmolLM2's
tokenizer --words 150 gives ~230 tokens an example (~180 of them the
answer's, learnt), with the question and the chat template's system prompt. Standard library only.

  python3 tools/bench/make_train_data.py OUT.jsonl [--examples 32] [--words 150] [--seed 0]
"""
import argparse
import json
import random

SUBJECTS = ["the farmer", "a small dog", "the old river", "my neighbour", "the teacher", "a quiet cat",
            "the engineer", "our village", "the morning train", "a young bird", "the baker", "the storm",
            "every child", "the garden", "a tired horse", "the captain", "the market", "a bright lamp"]
VERBS = ["carries", "watches", "finds", "builds", "remembers", "follows", "paints", "opens", "hears",
         "cleans", "visits", "counts", "leaves", "brings", "covers", "moves", "keeps", "shows"]
OBJECTS = ["the wooden table", "a basket of apples", "the long road", "an empty boat", "the red door",
           "a letter from home", "the warm bread", "a box of tools", "the winter coat", "the stone bridge",
           "a cup of tea", "the broken fence", "the city lights", "a pile of books", "the green hill",
           "the last candle", "a map of the coast", "the kitchen window"]
TAILS = ["before the sun goes down", "after a long day", "in the early morning", "near the old mill",
         "with great care", "without a word", "every second week", "during the rain", "for the whole family",
         "because it is late", "as the bells ring", "on the way to school", "under the tall trees", "again"]
LINKS = ["Then", "Later", "Often", "Still", "So", "Sometimes", "After that", "In the end", "Meanwhile", "Now"]
TOPICS = ["a day on the farm", "the village market", "a journey by train", "the winter storm",
          "the baker's shop", "a walk by the river", "the old lighthouse", "a busy kitchen"]


def sentence(rng, first):
    s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)}"
    if rng.random() < 0.6:
        s += " " + rng.choice(TAILS)
    if not first and rng.random() < 0.4:
        s = rng.choice(LINKS) + " " + s
    return s[0].upper() + s[1:] + "."


def answer(rng, words):
    out, n = [], 0
    while n < words:
        s = sentence(rng, not out)
        out.append(s)
        n += len(s.split())
    # paragraphs of ~4 sentences
    return "\n\n".join(" ".join(out[i:i + 4]) for i in range(0, len(out), 4))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--examples", type=int, default=32)
    ap.add_argument("--words", type=int, default=150, help="about this many words an answer")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    n_words = 0
    with open(a.out, "w", encoding="utf-8") as f:
        for i in range(a.examples):
            q = (f"Write a short story about {rng.choice(TOPICS)}, in which {rng.choice(SUBJECTS)} "
                 f"{rng.choice(VERBS)} {rng.choice(OBJECTS)}. Keep it simple.")
            ans = answer(rng, a.words)
            n_words += len(q.split()) + len(ans.split())
            f.write(json.dumps({"messages": [{"role": "user", "content": q},
                                             {"role": "assistant", "content": ans}]}) + "\n")
    print(f"make_train_data: {a.examples} examples, {n_words / max(a.examples, 1):.0f} words each on average "
          f"-> {a.out}")


if __name__ == "__main__":
    main()
