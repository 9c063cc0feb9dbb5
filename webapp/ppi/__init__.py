"""Prediction-powered inference: the judge scores every draft, people grade a sample drawn before grading."""
