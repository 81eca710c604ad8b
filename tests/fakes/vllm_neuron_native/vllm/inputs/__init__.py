"""FAKE vllm.inputs: TokensPrompt is a TypedDict in vLLM (a plain dict with prompt_token_ids)."""


def TokensPrompt(prompt_token_ids):
    return {"prompt_token_ids": prompt_token_ids}
