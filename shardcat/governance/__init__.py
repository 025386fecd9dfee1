"""Governance: principals and groups, privileges and their enforcement, credential vending, audit."""
