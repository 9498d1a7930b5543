"""The MNIST experiments (``bnn-zoo mnist-cnn``, ``mnist-bbb``; ``python -m`` on either module): the
Bayesian CNN, Bayes by Backprop, and what the two share.

- :mod:`~bnn_zoo.experiments.mnist.bbb`: Bayes by Backprop on MNIST MLPs (Blundell et al. 2015, as Garg, Singh and Loya reproduce it).
- :mod:`~bnn_zoo.experiments.mnist.cnn`: The Bayesian CNN of Zharikov, Isachenko and Bochkarev, "Bayesian Neural Networks", on MNIST.
- :mod:`~bnn_zoo.experiments.mnist.shared`: What the two MNIST experiments share: data flags, the data, the test predictions and their metrics.
"""

__all__: list[str] = []  # the modules are the family's content; the commands are bnn_zoo.cli's
