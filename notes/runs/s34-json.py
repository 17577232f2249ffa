# s34-json: against `hearth serve models/SmolLM2-135M-Instruct.Q4_1.gguf --port 8391 --parallel 1` on this VM.
# JSON mode's cost a token: the same prompt, 200 tokens, with and without the constraint (alternated).
import openai, time
c = openai.OpenAI(base_url="http://127.0.0.1:8391/v1", api_key="x", max_retries=0)
msgs = [{"role": "user", "content": "List three fruits as JSON."}]
for rep in range(3):
    for mode in ("plain", "json"):
        kw = {"response_format": {"type": "json_object"}} if mode == "json" else {"extra_body": {"ignore_eos": True}}
        t0 = time.time()
        r = c.chat.completions.create(model="m", messages=msgs, max_tokens=200, temperature=0, **kw)
        dt = time.time() - t0
        print(f"{mode} rep {rep}: {r.usage.completion_tokens} tokens in {dt:.3f} s, {1000 * dt / r.usage.completion_tokens:.2f} ms a token ({r.choices[0].finish_reason})")
