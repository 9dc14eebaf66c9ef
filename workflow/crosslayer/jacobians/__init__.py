"""Exact block Jacobians: single-token closed form with autograd references, and multi-token Jacobians
through the real blocks.
"""
