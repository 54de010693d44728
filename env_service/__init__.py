"""The FastAPI environment service: routes only; the logic lives in `seal.env.store` and below.

Run it with `python -m env_service` or `seal serve`; build it in-process with `env_service.app.create_app`.
"""
