"""Grading untrusted notebooks: student copies, the sandbox, autograding, the self-test."""
