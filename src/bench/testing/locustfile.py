# Locust side of the load-tool comparison (src/bench/testing/compare_tools.sh):
# the same POST as wrk and redline bench, FastHttpUser, no think time.
from locust import task
from locust.contrib.fasthttp import FastHttpUser

BODY = '{"messages":[{"role":"user","content":"hi"}],"max_tokens":16,"stream":false}'


class Chat(FastHttpUser):
    @task
    def chat(self):
        self.client.post("/v1/chat/completions", data=BODY,
                         headers={"Content-Type": "application/json"})
