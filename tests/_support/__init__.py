"""Harnesses the tests share: servers, API processes, stores, factories, worker fleets."""
