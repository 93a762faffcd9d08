"""fitness"""
